//! The driver over Streamable HTTP (`--connect http://…`), against a scripted HTTP/1.1 server:
//! `initialize` opens the connection and its stream, later POSTs name it (and their session),
//! a session's stream is open before the answer naming it is read, the kit's answer to a
//! request that came on a session's stream names that session, cookies and the token go on
//! every request, the lines of events are messages (junk recorded), refusals are sentences,
//! and dropping the peer ends the connection (`DELETE`). Every wait has a deadline.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use acp_conform::{Connect, Peer, Sent};
use serde_json::{Value, json};

/// How long the scripted server waits for the kit, at most.
const SERVER_WAIT: Duration = Duration::from_secs(10);
/// The kit's deadline.
const TIMEOUT: Duration = Duration::from_secs(5);

/// One request the server read: its method, headers (names in lower case) and body.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// The scripted server: what it read, and the event streams open (by session; `""` is the
/// connection's).
#[derive(Default)]
struct Script {
    seen: Vec<Seen>,
    streams: HashMap<String, Sender<String>>,
}

/// A server on a loopback port answering `/acp` as an ACP Streamable HTTP endpoint would,
/// for the few messages of the test; `status` is what it answers `initialize` with.
fn serve(status: u16) -> (Connect, Arc<Mutex<Script>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = listener.local_addr().expect("its address").port();
    let script = Arc::new(Mutex::new(Script::default()));
    let shared = script.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let script = shared.clone();
            thread::spawn(move || answer(stream, &script, status));
        }
    });
    let connect = Connect {
        url: format!("http://127.0.0.1:{port}/acp"),
        token: Some("t0ken".into()),
        workspace_root: std::env::temp_dir(),
    };
    (connect, script)
}

/// Reads one request of `stream` (`None` at its end).
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let method = line.split(' ').next()?.to_string();
    let mut headers = HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
    }
    let length = headers.get("content-length").and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Answers the requests of one TCP connection.
fn answer(stream: TcpStream, script: &Mutex<Script>, status: u16) {
    stream.set_read_timeout(Some(SERVER_WAIT)).expect("a read timeout");
    let mut writer = stream.try_clone().expect("a second handle");
    let mut reader = BufReader::new(stream);
    while let Some(seen) = read_request(&mut reader) {
        script.lock().unwrap().seen.push(seen.clone());
        let reply = |writer: &mut TcpStream, status: &str, headers: &str, body: &str| {
            let head = format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n", body.len());
            writer
                .write_all(head.as_bytes())
                .and_then(|()| writer.write_all(body.as_bytes()))
        };
        let written = match seen.method.as_str() {
            "POST" if status != 200 => reply(&mut writer, &format!("{status} Refused"), "", "go away\n"),
            "POST" => post(&mut writer, &seen, script, reply),
            "GET" => return stream_events(writer, &seen, script),
            "DELETE" => {
                // Ends every stream.
                script.lock().unwrap().streams.clear();
                reply(&mut writer, "202 Accepted", "", "")
            }
            _ => reply(&mut writer, "405 Method Not Allowed", "", ""),
        };
        if written.is_err() {
            return;
        }
    }
}

/// Answers a POST: `initialize` with `200` and the connection's id (and a cookie); the rest
/// with `202`, their answers (and a request of the agent's) on the streams.
fn post(
    writer: &mut TcpStream,
    seen: &Seen,
    script: &Mutex<Script>,
    reply: impl Fn(&mut TcpStream, &str, &str, &str) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let message: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
    let push = |stream: &str, data: &str| {
        if let Some(sender) = script.lock().unwrap().streams.get(stream) {
            let _ = sender.send(data.to_string());
        }
    };
    match message["method"].as_str() {
        Some("initialize") if seen.header("acp-connection-id").is_none() => {
            let body = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}});
            return reply(
                writer,
                "200 OK",
                "Content-Type: application/json\r\nAcp-Connection-Id: c1\r\nSet-Cookie: affinity=b7; Path=/\r\n",
                &body.to_string(),
            );
        }
        Some("conform/refused") => return reply(writer, "400 Bad Request", "", "not this one\n"),
        Some("session/new") => {
            push(
                "",
                &json!({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}}).to_string(),
            );
        }
        Some("session/prompt") => {
            // A request of the agent's, junk, and an event of two messages.
            push(
                "s1",
                r#"{"jsonrpc":"2.0","id":"ask-1","method":"session/request_permission","params":{"sessionId":"s1"}}"#,
            );
            push("s1", "not json-rpc");
            let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}});
            push(
                "s1",
                &format!(
                    "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"s1\"}}}}\n{answer}"
                ),
            );
        }
        _ => {}
    }
    reply(writer, "202 Accepted", "", "")
}

/// Serves one event stream: its events until it is ended (`DELETE`).
fn stream_events(mut writer: TcpStream, seen: &Seen, script: &Mutex<Script>) {
    let (sender, events): (Sender<String>, Receiver<String>) = channel();
    let session = seen.header("acp-session-id").unwrap_or_default().to_string();
    script.lock().unwrap().streams.insert(session, sender);
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n: open\n\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return;
    }
    while let Ok(data) = events.recv_timeout(SERVER_WAIT) {
        let lines: String = data.split('\n').map(|line| format!("data: {line}\n")).collect();
        if writer.write_all(format!("id: 1\n{lines}\n").as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn messages_go_by_post_and_come_on_the_streams_of_their_connection_and_session() {
    let (connect, script) = serve(200);
    let mut peer = Peer::connect(&connect, TIMEOUT).expect("a peer");
    assert!(peer.is_remote() && peer.is_http() && peer.pid().is_none());
    assert_eq!(peer.channel(), "the SSE streams");

    let (_, init) = peer.call(json!(0), "initialize", json!({})).expect("initialize");
    assert_eq!(init["result"]["protocolVersion"], 1);
    let (_, new) = peer.call(json!(1), "session/new", json!({})).expect("session/new");
    assert_eq!(new["result"]["sessionId"], "s1");
    let gets = |script: &Mutex<Script>| -> Vec<Option<String>> {
        let script = script.lock().unwrap();
        let gets = script.seen.iter().filter(|seen| seen.method == "GET");
        gets.map(|seen| seen.header("acp-session-id").map(str::to_string))
            .collect()
    };
    assert_eq!(
        gets(&script),
        vec![None, Some("s1".to_string())],
        "the connection's stream, and the session's before its answer was handed on"
    );

    peer.request(json!(2), "session/prompt", json!({"sessionId": "s1", "prompt": []}))
        .expect("posted");
    let ask = peer.recv().expect("the agent's request");
    assert_eq!(ask["method"], "session/request_permission");
    peer.send(&json!({"jsonrpc": "2.0", "id": "ask-1", "result": {"outcome": {"outcome": "cancelled"}}}))
        .expect("the answer posted");
    assert_eq!(peer.recv().expect("an update")["method"], "session/update");
    assert_eq!(peer.recv().expect("the answer")["id"], 2);
    assert_eq!(peer.junk, vec!["not json-rpc"]);

    match peer.try_send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"conform/refused"}"#) {
        Ok(Sent::Refused { status: 400, sentence }) => {
            assert!(
                sentence.contains("400 Bad Request") && sentence.contains("not this one"),
                "{sentence}"
            );
        }
        other => panic!("not refused: {other:?}"),
    }
    drop(peer);

    let seen = script.lock().unwrap().seen.clone();
    let posts: Vec<&Seen> = seen.iter().filter(|seen| seen.method == "POST").collect();
    let prompt = posts
        .iter()
        .find(|seen| seen.body.contains("session/prompt"))
        .expect("the prompt");
    assert_eq!(
        prompt.header("acp-session-id"),
        Some("s1"),
        "a session-scoped POST names its session"
    );
    let answered = posts
        .iter()
        .find(|seen| seen.body.contains("ask-1"))
        .expect("the answer");
    assert_eq!(
        answered.header("acp-session-id"),
        Some("s1"),
        "the answer to a request of a session's stream names that session"
    );
    assert_eq!(
        posts[0].header("acp-connection-id"),
        None,
        "initialize opens the connection"
    );
    for later in &seen[1..] {
        assert_eq!(later.header("acp-connection-id"), Some("c1"), "{later:?}");
        assert_eq!(
            later.header("cookie"),
            Some("affinity=b7"),
            "the cookie is returned: {later:?}"
        );
    }
    for each in &seen {
        assert_eq!(each.header("authorization"), Some("Bearer t0ken"), "{each:?}");
    }
    assert_eq!(
        seen.last().map(|seen| seen.method.as_str()),
        Some("DELETE"),
        "dropping ends the connection"
    );
    assert!(
        posts
            .iter()
            .all(|seen| seen.header("content-type") == Some("application/json"))
    );
    assert!(
        seen.iter()
            .filter(|seen| seen.method == "GET")
            .all(|seen| seen.header("accept") == Some("text/event-stream"))
    );
}

#[test]
fn refusals_and_unreachable_servers_are_sentences() {
    let (connect, _script) = serve(401);
    let mut peer = Peer::connect(&connect, TIMEOUT).expect("a peer");
    let error = peer.call(json!(0), "initialize", json!({})).expect_err("refused");
    assert!(
        error.ends_with("401 Unauthorized: the server refused the token (--token)"),
        "{error}"
    );
    assert!(!error.contains("t0ken"), "the token is never printed: {error}");

    let (connect, _script) = serve(403);
    let mut peer = Peer::connect(&connect, TIMEOUT).expect("a peer");
    let error = peer.call(json!(0), "initialize", json!({})).expect_err("refused");
    assert!(error.contains("403 Forbidden") && error.contains("go away"), "{error}");

    let (connect, _script) = serve(404);
    let mut peer = Peer::connect(&connect, TIMEOUT).expect("a peer");
    let error = peer.call(json!(0), "initialize", json!({})).expect_err("refused");
    assert!(
        error.contains("404 Not Found") && error.contains("no ACP endpoint at this URL"),
        "{error}"
    );

    let https = Connect {
        url: "https://127.0.0.1:1/acp".into(),
        ..connect
    };
    let error = Peer::connect(&https, TIMEOUT).err().expect("no TLS");
    assert!(error.contains("https:// is not supported"), "{error}");
}
