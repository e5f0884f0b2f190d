//! The dialect seam: where a connection that speaks another protocol version than the
//! runtime's is translated, at the connection core's two edges.
//!
//! The runtime speaks one version internally (the default revision's, protocol version 1).
//! A connection whose peer speaks another has a [`Dialect`], chosen at `initialize`: each
//! frame the peer sends goes through [`Dialect::incoming`] before the [`Role`](super::Role)
//! sees it, and each line the runtime sends goes through the dialect's
//! [`Rewrite`] just before the ordered writer. A connection
//! without one (every v1 connection) is untouched: one `OnceLock` load per line.
//!
//! A [`Seam`] is the per-connection slot: a role hands it out with
//! [`Role::seam`](super::Role::seam); [`serve`](super::serve) passes every frame through it.
//! Who installs the dialect depends on the side: an agent face picks it from the client's
//! `initialize` through its [`Negotiate`]; a client face installs its own before it sends
//! `initialize` ([`Seam::install`]).

use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use tokio::sync::mpsc;

use crate::jsonrpc::Unreadable;
use crate::jsonrpc::outbox::{Outbox, Rewrite, RewriteSlot, WeakOutbox};

/// What a frame of the peer's becomes for the role.
#[derive(Debug)]
pub enum Inbound {
    /// A message in the runtime's own version, handed to the role as if the peer had sent it:
    /// one line without its newline, as [`Frame::Line`](crate::jsonrpc::frame::Frame::Line).
    Line(Vec<u8>),
    /// Refused before the role sees it (a method the peer's version does not have, an invalid
    /// entry of a batch): the role answers it as it answers an unreadable frame.
    Refused(Box<Unreadable>),
    /// A line the dialect says to the peer itself, already in the peer's version (a state its
    /// version reports when the runtime's has no message for it, the answer to a batch):
    /// written as it is, before the role is handed what follows in the frame.
    Say(Vec<u8>),
}

/// One connection's translation between the peer's protocol version and the runtime's.
/// Its state (ids of requests in flight, message ids, …) is per connection: one value per
/// connection, shared by its reader and its writer.
pub trait Dialect: Rewrite + 'static {
    /// The protocol version spoken on the wire.
    fn version(&self) -> u16;

    /// One frame the peer sent: the messages it becomes for the role, in order, appended to
    /// `out` (none, one, or several: a batch).
    fn incoming(&self, line: Vec<u8>, out: &mut Vec<Inbound>);
}

/// How an agent face picks a connection's dialect from the client's `initialize`.
pub trait Negotiate: Send + Sync {
    /// The dialect for a client that asked for protocol version `asked`; `None`: the
    /// runtime's own version, untranslated.
    fn at_initialize(&self, asked: u64) -> Option<Arc<dyn Dialect>>;
}

/// A connection's dialect slot: empty until `initialize` settles it, then set for good.
#[derive(Clone)]
pub struct Seam {
    inner: Arc<SeamInner>,
}

struct SeamInner {
    /// Settled: `Some(dialect)`, or `None` for the runtime's own version.
    settled: OnceLock<Option<Arc<dyn Dialect>>>,
    negotiate: Option<Arc<dyn Negotiate>>,
    /// The outbox's rewrite, not the outbox: a seam must not keep the connection's writer
    /// open (a client closing its agent's stdin drops every outbox but the reader's seam).
    rewrite: RewriteSlot,
    /// Where [`Inbound::Say`] lines are written (weak, for the same reason).
    outbox: WeakOutbox,
}

impl std::fmt::Debug for Seam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seam")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl Seam {
    /// The seam of the connection written through `outbox`; `negotiate` picks its dialect at
    /// the peer's `initialize` (an agent face), or `None` (the side installs one itself).
    pub fn new(outbox: &Outbox, negotiate: Option<Arc<dyn Negotiate>>) -> Seam {
        Seam {
            inner: Arc::new(SeamInner {
                settled: OnceLock::new(),
                negotiate,
                rewrite: outbox.rewrite_slot(),
                outbox: outbox.downgrade(),
            }),
        }
    }

    /// Translates the connection through `dialect` from now on, both ways. Set once: `false`
    /// when the connection's version was settled already (then nothing changes).
    pub fn install(&self, dialect: Arc<dyn Dialect>) -> bool {
        let mut installed = false;
        self.inner.settled.get_or_init(|| {
            installed = self.inner.rewrite.set(dialect.clone());
            installed.then_some(dialect)
        });
        installed
    }

    /// Settles the connection on the runtime's own version (nothing is translated).
    pub fn settle_untranslated(&self) {
        let _ = self.inner.settled.set(None);
    }

    /// Whether the connection was settled on the runtime's own version: its lines pass
    /// untranslated, and need not go through [`incoming`](Seam::incoming).
    pub fn passes_through(&self) -> bool {
        matches!(self.inner.settled.get(), Some(None))
    }

    /// The connection's dialect, once one is installed.
    pub fn dialect(&self) -> Option<&Arc<dyn Dialect>> {
        self.inner.settled.get().and_then(Option::as_ref)
    }

    /// The protocol version the peer speaks: the dialect's, else the runtime's own (1).
    pub fn version(&self) -> u16 {
        self.dialect().map_or(RUNTIME_VERSION, |dialect| dialect.version())
    }

    /// Writes a line the dialect says to the peer itself ([`Inbound::Say`]), as it is; nothing
    /// once the connection's writer is gone.
    pub async fn say(&self, line: Vec<u8>) {
        if let Some(outbox) = self.inner.outbox.upgrade() {
            let _ = outbox.send_untranslated(line).await;
        }
    }

    /// One frame of the peer's: what the role is handed, in order. Before the version is
    /// settled, a peer's `initialize` request settles it through the [`Negotiate`].
    pub fn incoming(&self, line: Vec<u8>) -> Vec<Inbound> {
        if self.inner.settled.get().is_none()
            && let Some(negotiate) = &self.inner.negotiate
            && let Some(asked) = initialize_version(&line)
        {
            match negotiate.at_initialize(asked) {
                Some(dialect) => {
                    self.install(dialect);
                }
                None => self.settle_untranslated(),
            }
        }
        let mut out = Vec::with_capacity(1);
        match self.dialect() {
            Some(dialect) => dialect.incoming(line, &mut out),
            None => out.push(Inbound::Line(line)),
        }
        out
    }
}

/// Answers a dialect gave our own requests itself (the peer's version has no counterpart for
/// them), as a client face hands them back: read by the role as the peer's answers (see
/// [`loopback_answered`](super::loopback_answered)).
pub type LoopbackAnswers = Option<mpsc::UnboundedReceiver<Vec<u8>>>;

/// The next loopback answer, for a role's [`Role::wait`](super::Role::wait): pending for good without a
/// loopback or once it is closed. Cancel-safe.
pub async fn next_loopback(loopback: &mut LoopbackAnswers) -> Vec<u8> {
    match loopback {
        Some(answers) => match answers.recv().await {
            Some(answer) => answer,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The internal notice a server sends once it has taken a prompt (`params.requestId`), only
/// on a connection with a dialect: what a dialect whose prompts are acknowledged at once (v2)
/// turns into the acknowledgement. Never written to the wire as it is.
pub const PROMPT_ACCEPTED: &str = "$/agentacp/prompt_accepted";

/// The internal notice a server sends, only on a connection with a dialect, when a session is
/// resumed without its history replayed: `params.sessionId` and the stored `params.updates`,
/// for a dialect that numbers a session's messages by their place in its history (v2).
/// Never written to the wire as it is.
pub const SESSION_HISTORY: &str = "$/agentacp/session_history";

/// The runtime's own protocol version (the default revision's).
pub const RUNTIME_VERSION: u16 = crate::wire::default::PROTOCOL_VERSION;

/// The `protocolVersion` an `initialize` request asks for; `None` for any other frame (and
/// for an `initialize` without a readable version: the runtime answers that one itself).
fn initialize_version(line: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Initialize {
        method: String,
        #[serde(default)]
        id: Option<serde_json::Value>,
        params: Params,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        protocol_version: u64,
    }
    // Only a frame that names the method is parsed.
    if !line.windows(12).any(|w| w == b"\"initialize\"") {
        return None;
    }
    let message: Initialize = serde_json::from_slice(line).ok()?;
    (message.method == "initialize" && message.id.is_some()).then_some(message.params.protocol_version)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// A dialect that tags lines: incoming ones with `in:`, outgoing ones with `out:`.
    struct Tagging(Mutex<u32>);

    impl Rewrite for Tagging {
        fn rewrite(&self, line: Vec<u8>, out: &mut Vec<Vec<u8>>) {
            out.push([b"out:".as_slice(), &line].concat());
        }
    }

    impl Dialect for Tagging {
        fn version(&self) -> u16 {
            7
        }

        fn incoming(&self, line: Vec<u8>, out: &mut Vec<Inbound>) {
            *self.0.lock().unwrap() += 1;
            out.push(Inbound::Line([b"in:".as_slice(), &line].concat()));
        }
    }

    struct Seven;

    impl Negotiate for Seven {
        fn at_initialize(&self, asked: u64) -> Option<Arc<dyn Dialect>> {
            (asked == 7).then(|| Arc::new(Tagging(Mutex::new(0))) as Arc<dyn Dialect>)
        }
    }

    fn lines(inbound: Vec<Inbound>) -> Vec<String> {
        inbound
            .into_iter()
            .map(|item| match item {
                Inbound::Line(line) => String::from_utf8(line).unwrap(),
                Inbound::Refused(refused) => format!("refused {}", refused.error.message),
                Inbound::Say(line) => format!("say {}", String::from_utf8(line).unwrap()),
            })
            .collect()
    }

    /// The peer's `initialize` settles the version: asked for the dialect's, everything is
    /// translated both ways from that frame on; asked for another, nothing ever is.
    #[tokio::test]
    async fn initialize_settles_the_dialect_once_for_both_directions() {
        let init = |version: u32| {
            format!(r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":{version}}}}}"#)
                .into_bytes()
        };
        let (reader, writer) = tokio::io::duplex(4096);
        let (outbox, task) = Outbox::start(writer, Duration::from_secs(5));
        let seam = Seam::new(&outbox, Some(Arc::new(Seven)));
        assert_eq!(lines(seam.incoming(b"early".to_vec())), ["early"]);
        assert_eq!(seam.version(), 1);
        assert_eq!(lines(seam.incoming(init(7)))[0].get(..3), Some("in:"));
        assert_eq!(seam.version(), 7);
        assert_eq!(
            lines(seam.incoming(init(1))),
            [format!("in:{}", String::from_utf8(init(1)).unwrap())]
        );
        assert!(!seam.install(Arc::new(Tagging(Mutex::new(0)))), "set once");
        outbox.send(b"x\n".to_vec()).await.unwrap();
        drop((outbox, seam));
        task.await.unwrap().unwrap();
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut { reader }, &mut written)
            .await
            .unwrap();
        assert_eq!(written, "out:x\n");

        let (_reader, writer) = tokio::io::duplex(64);
        let (outbox, _task) = Outbox::start(writer, Duration::from_secs(5));
        let seam = Seam::new(&outbox, Some(Arc::new(Seven)));
        assert_eq!(lines(seam.incoming(init(1))), [String::from_utf8(init(1)).unwrap()]);
        assert_eq!(lines(seam.incoming(init(7))), [String::from_utf8(init(7)).unwrap()]);
        assert!(!outbox.rewrites());
    }
}
