//! One ACP connection over Streamable HTTP: the lines POSTed go to the server's input; the
//! lines it writes are routed to the connection's SSE streams.
//!
//! Routing: a request or notification of the server's whose `params` name a `sessionId` goes
//! to that session's stream, anything else to the connection's; an answer goes where the
//! request it answers was recorded to go (`session/new`, `session/load`, `session/fork` and
//! `session/resume` to the connection's stream, other requests naming a session to its
//! stream). The answer to `initialize` goes to the POST that sent it.
//!
//! Bounds: what waits in the streams, all together, is at most [`HttpConnection::budget`]
//! bytes. A client that opens no stream (or reads none) leaves the server's output waiting
//! once that is full; after the write timeout the connection is ended. A connection with no
//! stream open and no request for the detach time is ended too.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use crate::auth::Identity;
use crate::sync::lock;

/// How many session streams a client may open before the server names the session (for
/// `session/load`, whose updates come before its answer).
const MAX_UNCONFIRMED_SESSIONS: usize = 8;

/// How many events a stream keeps after they were sent, for a client that resumes it with
/// `Last-Event-ID`.
const RETAINED_EVENTS: usize = 256;

/// How many bytes of events a stream keeps after they were sent (at most).
const RETAINED_BYTES: usize = 1 << 20;

/// How many requests of the client may wait for their answers' routes at once.
const MAX_PENDING: usize = 1024;

/// The methods whose answer opens (or reopens) a session: answered on the connection's stream.
const OPENING: [&str; 4] = ["session/new", "session/load", "session/fork", "session/resume"];

/// Where a line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// The connection-scoped stream.
    Connection,
    /// A session's stream.
    Session(String),
}

/// A line waiting in a stream, with its event id and its share of the budget.
pub(super) struct Queued {
    id: u64,
    line: String,
    _share: OwnedSemaphorePermit,
}

/// A stream's queue, read by the GET that holds the stream (and, once it has let go, by a
/// GET that took the stream over).
type Queue = Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>>;

/// A GET's hold on a stream, ended when a resuming GET takes the stream over.
#[derive(Default)]
struct Hold {
    over: std::sync::atomic::AtomicBool,
    told: tokio::sync::Notify,
}

impl Hold {
    fn end(&self) {
        self.over.store(true, Ordering::SeqCst);
        self.told.notify_waiters();
    }

    fn is_over(&self) -> bool {
        self.over.load(Ordering::SeqCst)
    }

    /// Completes once the hold has ended.
    async fn ended(&self) {
        loop {
            let told = self.told.notified();
            if self.is_over() {
                return;
            }
            told.await;
        }
    }
}

/// One SSE stream: its queue, the hold of the GET that reads it, and the events it sent last.
struct Stream {
    sender: Option<mpsc::UnboundedSender<Queued>>,
    queue: Queue,
    /// The GET reading it, if one does.
    held: Option<Arc<Hold>>,
    /// Named by the server (else opened by the client ahead of `session/load`).
    confirmed: bool,
    /// The id of the last event queued (ids start at 1).
    last_queued: u64,
    /// The id of the last event sent.
    last_sent: u64,
    /// The last events sent, oldest first, at most [`RETAINED_EVENTS`] and
    /// [`RETAINED_BYTES`].
    sent: VecDeque<(u64, Arc<str>)>,
    sent_bytes: usize,
}

impl Stream {
    fn new(confirmed: bool) -> Stream {
        let (sender, receiver) = mpsc::unbounded_channel();
        Stream {
            sender: Some(sender),
            queue: Arc::new(tokio::sync::Mutex::new(receiver)),
            held: None,
            confirmed,
            last_queued: 0,
            last_sent: 0,
            sent: VecDeque::new(),
            sent_bytes: 0,
        }
    }

    /// The events after `last` that were sent, to send again; `None` if some are no longer
    /// kept (or `last` was never sent).
    fn since(&self, last: u64) -> Option<VecDeque<(u64, Arc<str>)>> {
        if last > self.last_sent {
            return None;
        }
        if last == self.last_sent {
            return Some(VecDeque::new());
        }
        let oldest = self.sent.front().map(|(id, _)| *id)?;
        if oldest > last + 1 {
            return None;
        }
        Some(self.sent.iter().filter(|(id, _)| *id > last).cloned().collect())
    }

    /// Keeps event `id` as sent, forgetting the oldest beyond the bounds.
    fn keep(&mut self, id: u64, line: Arc<str>) {
        self.last_sent = id;
        self.sent_bytes += line.len();
        self.sent.push_back((id, line));
        while self.sent.len() > RETAINED_EVENTS || self.sent_bytes > RETAINED_BYTES {
            match self.sent.pop_front() {
                Some((_, line)) => self.sent_bytes -= line.len(),
                None => break,
            }
        }
    }
}

#[derive(Default)]
struct Streams {
    connection: Option<Stream>,
    sessions: HashMap<String, Stream>,
    /// The routes of the answers to the client's requests, by request id (its JSON text).
    pending: HashMap<String, Route>,
    /// The id of the `initialize` request and who waits for its answer.
    initialize: Option<(String, oneshot::Sender<String>)>,
    /// Ended: no more streams, no more lines.
    closed: bool,
}

/// Why a stream cannot be opened.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unavailable {
    /// Another GET reads it (`409`).
    Busy,
    /// The session is not known, and enough unknown ones are open (`404`).
    Unknown,
    /// `Last-Event-ID` names an event no longer kept, or never sent (`409`).
    Gone,
    /// The connection has ended (`404`).
    Closed,
}

/// Why a POST cannot be handed on.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NotTaken {
    /// Too many requests wait for their answers.
    TooMany,
    /// The server took nothing for the write timeout, or its input has ended.
    Stuck,
}

/// An ACP connection served over Streamable HTTP.
pub(super) struct HttpConnection {
    /// Its `Acp-Connection-Id`.
    pub(super) id: String,
    /// Who opened it with a bearer token: later requests must show that identity.
    pub(super) owner: Option<Identity>,
    /// The number of its place among the unauthenticated when it opened without a token
    /// (`Gate::is_unproven` tells whether it has authenticated since).
    pub(super) unproven: Option<u64>,
    input: tokio::sync::Mutex<Option<WriteHalf<DuplexStream>>>,
    streams: Mutex<Streams>,
    budget: Arc<Semaphore>,
    budget_bytes: usize,
    write_timeout: Duration,
    last_activity: Mutex<Instant>,
    readers: AtomicUsize,
}

impl HttpConnection {
    /// A connection writing the client's lines to `input`, whose streams hold at most
    /// `budget_bytes` in all, giving up on a peer after `write_timeout`.
    pub(super) fn new(
        id: String,
        owner: Option<Identity>,
        unproven: Option<u64>,
        input: WriteHalf<DuplexStream>,
        budget_bytes: usize,
        write_timeout: Duration,
    ) -> Arc<HttpConnection> {
        let streams = Streams {
            connection: Some(Stream::new(true)),
            ..Streams::default()
        };
        Arc::new(HttpConnection {
            id,
            owner,
            unproven,
            input: tokio::sync::Mutex::new(Some(input)),
            streams: Mutex::new(streams),
            budget: Arc::new(Semaphore::new(budget_bytes)),
            budget_bytes,
            write_timeout,
            last_activity: Mutex::new(Instant::now()),
            readers: AtomicUsize::new(0),
        })
    }

    /// Hands the client's `line` to the server; the answer to request `id` (its JSON text)
    /// will go to `route`.
    pub(super) async fn post(&self, line: &str, answer: Option<(String, Route)>) -> Result<(), NotTaken> {
        self.touch();
        if let Some((id, route)) = answer {
            let mut streams = lock(&self.streams);
            if streams.pending.len() >= MAX_PENDING {
                return Err(NotTaken::TooMany);
            }
            streams.pending.insert(id, route);
        }
        self.write(line).await
    }

    /// Hands `initialize` (request `id`) to the server and waits up to `wait` for its answer.
    pub(super) async fn initialize(&self, line: &str, id: String, wait: Duration) -> Option<String> {
        let (tell, answer) = oneshot::channel();
        lock(&self.streams).initialize = Some((id, tell));
        self.write(line).await.ok()?;
        tokio::time::timeout(wait, answer).await.ok()?.ok()
    }

    async fn write(&self, line: &str) -> Result<(), NotTaken> {
        let mut input = self.input.lock().await;
        let Some(input) = input.as_mut() else {
            return Err(NotTaken::Stuck);
        };
        let writing = async {
            input.write_all(line.trim_end().as_bytes()).await?;
            input.write_all(b"\n").await?;
            input.flush().await
        };
        match tokio::time::timeout(self.write_timeout, writing).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(NotTaken::Stuck),
        }
    }

    /// Ends the server's input, as a closed stdin does (running turns are cancelled and
    /// answered); the streams carry what it still writes.
    pub(super) async fn end_input(&self) {
        if let Some(mut input) = self.input.lock().await.take() {
            let _ = tokio::time::timeout(self.write_timeout, input.shutdown()).await;
        }
    }

    /// Ends every stream once what waits in it is read; no new one opens.
    pub(super) fn close_streams(&self) {
        let mut streams = lock(&self.streams);
        streams.closed = true;
        streams.connection = None;
        streams.sessions.clear();
        streams.initialize = None;
    }

    /// The reader of the connection's stream (`None`) or of `session`'s; with `last` (the
    /// client's `Last-Event-ID`), the events sent after it come first. A stream another GET
    /// holds is `Busy`, unless this one resumes it (`last`): a client comes back on a new
    /// TCP connection before the server has seen its old one go, so the new GET takes the
    /// stream over (the old one ends, and what it sent after `last` is sent again).
    pub(super) fn subscribe(self: &Arc<Self>, session: Option<&str>, last: Option<u64>) -> Result<Reader, Unavailable> {
        let mut streams = lock(&self.streams);
        if streams.closed {
            return Err(Unavailable::Closed);
        }
        let streams = &mut *streams;
        let stream = match session {
            None => streams.connection.as_mut().ok_or(Unavailable::Closed)?,
            Some(session) => {
                if !streams.sessions.contains_key(session) {
                    let unconfirmed = streams.sessions.values().filter(|stream| !stream.confirmed).count();
                    if unconfirmed >= MAX_UNCONFIRMED_SESSIONS {
                        return Err(Unavailable::Unknown);
                    }
                }
                streams
                    .sessions
                    .entry(session.to_string())
                    .or_insert_with(|| Stream::new(false))
            }
        };
        if stream.held.is_some() && last.is_none() {
            return Err(Unavailable::Busy);
        }
        let replay = match last {
            Some(last) => stream.since(last).ok_or(Unavailable::Gone)?,
            None => VecDeque::new(),
        };
        // Taking over: what to send again is known once the old GET has let go of the queue.
        let (replay, after) = match stream.held.take() {
            Some(old) => {
                old.end();
                (VecDeque::new(), last)
            }
            None => (replay, None),
        };
        let hold = Arc::new(Hold::default());
        stream.held = Some(hold.clone());
        self.readers.fetch_add(1, Ordering::SeqCst);
        self.touch();
        Ok(Reader {
            replay,
            after,
            queue: stream.queue.clone(),
            hold,
            connection: self.clone(),
            session: session.map(str::to_string),
        })
    }

    /// Routes what the server writes to `output` until it ends. A line that finds no room in
    /// the budget for the write timeout ends the connection's input; what follows is read
    /// and dropped, so that the server is never left waiting.
    pub(super) async fn route(self: Arc<Self>, output: ReadHalf<DuplexStream>) {
        let mut output = BufReader::new(output);
        let mut line = String::new();
        let mut stuck = false;
        loop {
            line.clear();
            match output.read_line(&mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_end();
            if text.is_empty() || stuck {
                continue;
            }
            if !self.deliver(text.to_string()).await {
                tracing::warn!(connection = %self.id, "the HTTP client read none of its streams for {:?}: ending its connection", self.write_timeout);
                stuck = true;
                self.end_input().await;
            }
        }
    }

    /// Queues `line` where it goes; `false` if no room was made for it in time.
    async fn deliver(&self, line: String) -> bool {
        let sender = {
            let mut streams = lock(&self.streams);
            match target(&mut streams, &line) {
                Target::Initialize(tell) => {
                    let _ = tell.send(line);
                    return true;
                }
                Target::Stream(sender, id) => (sender, id),
                Target::Nowhere => return true,
            }
        };
        let bytes = u32::try_from(line.len().clamp(1, self.budget_bytes)).unwrap_or(u32::MAX);
        let share = match tokio::time::timeout(self.write_timeout, self.budget.clone().acquire_many_owned(bytes)).await
        {
            Ok(Ok(share)) => share,
            _ => return false,
        };
        let (sender, id) = sender;
        let _ = sender.send(Queued {
            id,
            line,
            _share: share,
        });
        true
    }

    /// Ends when the connection has had no stream open and no request for `after`.
    pub(super) async fn detached(&self, after: Duration) {
        loop {
            let since = *lock(&self.last_activity);
            tokio::time::sleep_until(since + after).await;
            if self.readers.load(Ordering::SeqCst) == 0 && lock(&self.last_activity).elapsed() >= after {
                return;
            }
        }
    }

    fn touch(&self) {
        *lock(&self.last_activity) = Instant::now();
    }
}

/// Where one line of the server's goes.
enum Target {
    Initialize(oneshot::Sender<String>),
    /// A stream's queue, and the id of the event.
    Stream(mpsc::UnboundedSender<Queued>, u64),
    /// The connection has ended.
    Nowhere,
}

/// Where `line` goes (and what it tells about sessions, recorded).
fn target(streams: &mut Streams, line: &str) -> Target {
    if streams.closed {
        return Target::Nowhere;
    }
    let message: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    let session_of = |field: &str| {
        message
            .get(field)
            .and_then(|value| value.get("sessionId"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let route = if message.get("method").is_some() {
        session_of("params").map_or(Route::Connection, Route::Session)
    } else {
        let id = message.get("id").map(Value::to_string).unwrap_or_default();
        if streams.initialize.as_ref().is_some_and(|(waiting, _)| *waiting == id)
            && let Some((_, tell)) = streams.initialize.take()
        {
            return Target::Initialize(tell);
        }
        // A session opened by this answer gets its stream before the answer is read, so
        // that the client's GET right after finds it.
        if let Some(opened) = session_of("result") {
            confirm(streams, &opened);
        }
        streams.pending.remove(&id).unwrap_or(Route::Connection)
    };
    let stream = match route {
        Route::Connection => streams.connection.as_mut(),
        Route::Session(session) => {
            confirm(streams, &session);
            streams.sessions.get_mut(&session)
        }
    };
    match stream {
        Some(Stream {
            sender: Some(sender),
            last_queued,
            ..
        }) => {
            *last_queued += 1;
            Target::Stream(sender.clone(), *last_queued)
        }
        _ => Target::Nowhere,
    }
}

/// The session is known: its stream exists and counts as named by the server.
fn confirm(streams: &mut Streams, session: &str) {
    streams
        .sessions
        .entry(session.to_string())
        .or_insert_with(|| Stream::new(true))
        .confirmed = true;
}

/// The route of the answer to a client's request `method` with `params`.
pub(super) fn answer_route(method: &str, params: Option<&Value>) -> Route {
    let session = params
        .and_then(|params| params.get("sessionId"))
        .and_then(Value::as_str);
    match session {
        Some(session) if !OPENING.contains(&method) => Route::Session(session.to_string()),
        _ => Route::Connection,
    }
}

/// A GET's hold on one stream; gives it back when dropped.
pub(super) struct Reader {
    /// Events sent before, to send again first (`Last-Event-ID`).
    replay: VecDeque<(u64, Arc<str>)>,
    /// Taking the stream over from another GET: the `Last-Event-ID` whose followers are sent
    /// again, once that GET has let go of the queue.
    after: Option<u64>,
    queue: Queue,
    hold: Arc<Hold>,
    connection: Arc<HttpConnection>,
    session: Option<String>,
}

impl Reader {
    /// The next event and its id; `None` once the stream has ended and is read, or another
    /// GET took it over. It is kept for a client that resumes ([`RETAINED_EVENTS`]).
    pub(super) async fn next(&mut self) -> Option<(u64, Arc<str>)> {
        if self.hold.is_over() {
            return None;
        }
        if let Some(event) = self.replay.pop_front() {
            return Some(event);
        }
        let hold = self.hold.clone();
        let ended = hold.ended();
        tokio::pin!(ended);
        let mut queue = tokio::select! {
            biased;
            () = &mut ended => return None,
            queue = self.queue.lock() => queue,
        };
        if let Some(after) = self.after.take() {
            // What the old GET sent after the client's last event (all of it kept, or the
            // stream ends here: the client's next resume is then `409`).
            self.replay = self.with_stream(|stream| stream.since(after)).flatten()?;
            if let Some(event) = self.replay.pop_front() {
                return Some(event);
            }
        }
        let queued = tokio::select! {
            biased;
            () = &mut ended => return None,
            queued = queue.recv() => queued?,
        };
        let line: Arc<str> = queued.line.into();
        self.with_stream(|stream| stream.keep(queued.id, line.clone()));
        Some((queued.id, line))
    }

    /// The next event if one is there now (nothing is waited for): what follows an event
    /// [`next`](Self::next) gave, to send in the same chunk.
    pub(super) fn ready(&mut self) -> Option<(u64, Arc<str>)> {
        if self.hold.is_over() || self.after.is_some() {
            return None;
        }
        if let Some(event) = self.replay.pop_front() {
            return Some(event);
        }
        let queued = self.queue.try_lock().ok()?.try_recv().ok()?;
        let line: Arc<str> = queued.line.into();
        self.with_stream(|stream| stream.keep(queued.id, line.clone()));
        Some((queued.id, line))
    }

    /// `act` on this reader's stream, if it is still there.
    fn with_stream<T>(&self, act: impl FnOnce(&mut Stream) -> T) -> Option<T> {
        let mut streams = lock(&self.connection.streams);
        let stream = match &self.session {
            None => streams.connection.as_mut(),
            Some(session) => streams.sessions.get_mut(session),
        };
        stream.map(act)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.connection.readers.fetch_sub(1, Ordering::SeqCst);
        self.connection.touch();
        // Only the GET that holds the stream lets it go (one taken over has nothing to give).
        let held = self.with_stream(|stream| {
            let mine = stream.held.as_ref().is_some_and(|held| Arc::ptr_eq(held, &self.hold));
            if mine {
                stream.held = None;
            }
            mine.then_some(stream.confirmed)
        });
        // Opened ahead of a session the server never named: forgotten.
        if let (Some(Some(false)), Some(session)) = (held, &self.session) {
            lock(&self.connection.streams).sessions.remove(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> (Arc<HttpConnection>, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (_, input) = tokio::io::split(ours);
        (
            HttpConnection::new("c".into(), None, None, input, 64, Duration::from_millis(200)),
            theirs,
        )
    }

    #[test]
    fn answers_follow_their_requests_and_session_messages_their_session() {
        let mut streams = Streams {
            connection: Some(Stream::new(true)),
            ..Streams::default()
        };
        streams.pending.insert("3".into(), Route::Session("s1".into()));
        assert!(matches!(
            target(&mut streams, r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Target::Stream(_, 1)
        ));
        assert!(
            streams.sessions.contains_key("s1"),
            "the prompt's answer went to its session"
        );
        let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2"}}"#;
        assert!(matches!(target(&mut streams, update), Target::Stream(_, 1)));
        assert!(streams.sessions["s2"].confirmed);
        assert_eq!(answer_route("session/new", None), Route::Connection, "no session yet");
        let params: Value = serde_json::json!({"sessionId": "s1"});
        assert_eq!(answer_route("session/load", Some(&params)), Route::Connection);
        assert_eq!(
            answer_route("session/prompt", Some(&params)),
            Route::Session("s1".into())
        );
    }

    /// A client that never opens its stream: what waits is bounded by the budget, and once it
    /// is full the connection's input ends after the write timeout (the server is not left
    /// waiting: later lines are dropped).
    #[tokio::test]
    async fn a_client_that_reads_nothing_holds_at_most_the_budget_then_is_ended() {
        let (connection, _theirs) = connection();
        let (mut server, output) = tokio::io::duplex(1024);
        let (output, _) = tokio::io::split(output);
        let routing = tokio::spawn(connection.clone().route(output));
        let update = r#"{"jsonrpc":"2.0","method":"x","params":{"pad":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}"#;
        for _ in 0..20 {
            tokio::time::timeout(
                Duration::from_secs(5),
                server.write_all(format!("{update}\n").as_bytes()),
            )
            .await
            .expect("the server is never left waiting")
            .unwrap();
        }
        drop(server);
        tokio::time::timeout(Duration::from_secs(5), routing)
            .await
            .expect("routing ends")
            .unwrap();
        assert!(connection.input.lock().await.is_none(), "the input was ended");
        let waiting = connection.budget_bytes - connection.budget.available_permits();
        assert!(waiting <= 64, "at most the budget waits: {waiting}");
    }

    #[tokio::test]
    async fn one_reader_per_stream_and_a_few_unknown_sessions() {
        let (connection, _theirs) = connection();
        let reader = connection.subscribe(None, None).unwrap();
        assert_eq!(connection.subscribe(None, None).err(), Some(Unavailable::Busy));
        drop(reader);
        assert!(connection.subscribe(None, None).is_ok(), "given back");
        let held: Vec<Reader> = (0..MAX_UNCONFIRMED_SESSIONS)
            .map(|n| connection.subscribe(Some(&format!("s{n}")), None).unwrap())
            .collect();
        assert_eq!(
            connection.subscribe(Some("more"), None).err(),
            Some(Unavailable::Unknown)
        );
        drop(held);
        connection.close_streams();
        assert_eq!(connection.subscribe(None, None).err(), Some(Unavailable::Closed));
    }

    /// Issue #47: a client back on a new TCP connection before the server has seen its old
    /// one go: its GET with `Last-Event-ID` takes the stream over from the stale GET (which
    /// ends, even while it waits for an event), and what that GET sent after the id comes
    /// again, then the live events. A GET without `Last-Event-ID` is still refused.
    #[tokio::test]
    async fn a_resuming_get_takes_over_a_stream_a_stale_get_still_holds() {
        let (ours, _theirs) = tokio::io::duplex(1024);
        let (_, input) = tokio::io::split(ours);
        let connection = HttpConnection::new("c".into(), None, None, input, 4096, Duration::from_millis(200));
        let event = |n: u64| format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"n":{n}}}}}"#);
        let mut stale = connection.subscribe(None, None).unwrap();
        for n in 1..=2 {
            assert!(connection.deliver(event(n)).await);
        }
        assert_eq!(stale.next().await.unwrap().0, 1, "the client read this one");
        assert_eq!(stale.next().await.unwrap().0, 2, "lost in flight");
        // The stale GET waits for the next event, holding the queue.
        let waiting = tokio::spawn(async move { (stale.next().await, stale) });
        tokio::task::yield_now().await;
        assert_eq!(connection.subscribe(None, None).err(), Some(Unavailable::Busy));
        let mut resumed = connection.subscribe(None, Some(1)).unwrap();
        let (ended, stale) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the stale GET ends")
            .unwrap();
        assert_eq!(ended, None);
        let again = resumed.next().await.unwrap();
        assert_eq!((again.0, &*again.1), (2, event(2).as_str()), "sent again");
        assert!(connection.deliver(event(3)).await);
        assert_eq!(resumed.next().await.unwrap().0, 3, "then the live ones");
        drop(stale);
        assert_eq!(
            connection.subscribe(None, None).err(),
            Some(Unavailable::Busy),
            "the stale GET gave back nothing"
        );
        drop(resumed);
        assert!(connection.subscribe(None, None).is_ok(), "given back");
    }

    /// Issue #47: a client that lost its stream resumes it with `Last-Event-ID` and misses
    /// nothing that is still kept; a cursor no longer kept is refused.
    #[test]
    fn a_resumed_stream_sends_what_followed_the_last_event_id_and_a_lost_cursor_is_gone() {
        let mut stream = Stream::new(true);
        for id in 1..=(RETAINED_EVENTS as u64 + 10) {
            stream.keep(id, format!("event {id}").into());
        }
        let last = RETAINED_EVENTS as u64 + 10;
        assert_eq!(stream.since(last).unwrap().len(), 0, "up to date");
        let replay = stream.since(last - 3).unwrap();
        let ids: Vec<u64> = replay.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![last - 2, last - 1, last]);
        assert!(stream.since(5).is_none(), "event 6 is no longer kept");
        assert!(stream.since(last + 1).is_none(), "never sent");
        assert_eq!(
            stream.since(10).unwrap().len() as u64,
            last - 10,
            "the oldest kept follows 10"
        );
    }
}
