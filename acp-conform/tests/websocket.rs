//! The driver over WebSocket (`--connect`), against a scripted server: the lines of each text
//! message are messages, what is not JSON-RPC (binary messages too) is recorded as junk, a
//! server that stops reading cannot block the kit, and dropping the peer closes the
//! connection. Every wait has a deadline.

use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use acp_conform::driver::ReadError;
use acp_conform::{Connect, Peer};
use serde_json::json;
use tungstenite::{Message, WebSocket};

/// How long the scripted server waits for the kit, at most.
const SERVER_WAIT: Duration = Duration::from_secs(10);

/// A server on a loopback port that accepts one WebSocket connection and runs `script` on it.
fn serve<T: Send + 'static>(
    script: impl FnOnce(&mut WebSocket<TcpStream>) -> T + Send + 'static,
) -> (Connect, JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = listener.local_addr().expect("its address").port();
    let server = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("a connection");
        stream.set_read_timeout(Some(SERVER_WAIT)).expect("a read timeout");
        let mut socket = tungstenite::accept(stream).expect("the upgrade");
        script(&mut socket)
    });
    let connect = Connect {
        url: format!("ws://127.0.0.1:{port}/acp"),
        token: None,
        workspace_root: std::env::temp_dir(),
    };
    (connect, server)
}

/// The text messages the server reads until the kit closes (or it waits too long).
fn read_until_close(socket: &mut WebSocket<TcpStream>) -> (Vec<String>, bool) {
    let mut texts = Vec::new();
    loop {
        match socket.read() {
            Ok(Message::Text(text)) => texts.push(text.as_str().to_string()),
            Ok(Message::Close(_)) => {
                // Reading on sends the reply and ends the handshake.
                while socket.read().is_ok() {}
                return (texts, true);
            }
            Ok(_) => {}
            Err(_) => return (texts, false),
        }
    }
}

#[test]
fn text_lines_are_messages_junk_is_recorded_and_dropping_closes_the_connection() {
    let (connect, server) = serve(|socket| {
        let text = "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\nnot json-rpc\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n";
        socket.send(Message::text(text)).expect("send");
        socket.send(Message::binary(vec![1, 2, 3])).expect("send");
        socket
            .send(Message::text("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"))
            .expect("send");
        read_until_close(socket)
    });
    let mut peer = Peer::connect(&connect, Duration::from_secs(5)).expect("connects");
    assert!(peer.is_remote() && peer.pid().is_none());
    for method in ["a", "b"] {
        assert_eq!(peer.recv().expect("a message")["method"], method);
    }
    assert_eq!(peer.recv().expect("a message")["id"], 1);
    assert_eq!(peer.junk, vec!["not json-rpc", "<a binary message of 3 bytes>"]);
    assert_eq!(peer.channel(), "the WebSocket");
    peer.notify("conform/ping", json!({})).expect("queued");
    drop(peer);
    let (texts, closed) = server.join().expect("the server");
    assert_eq!(texts, vec![r#"{"jsonrpc":"2.0","method":"conform/ping","params":{}}"#]);
    assert!(closed, "the kit closed the connection with a close frame");
}

#[test]
fn a_server_that_stops_reading_cannot_block_the_kit() {
    let (release, released): (_, Receiver<()>) = channel();
    let (connect, server) = serve(move |_socket| {
        // Holds the connection open without reading, until released (or its deadline).
        let _ = released.recv_timeout(SERVER_WAIT);
    });
    let timeout = Duration::from_millis(500);
    let mut peer = Peer::connect(&connect, timeout).expect("connects");
    let started = Instant::now();
    // 32 MiB: far more than the socket buffers hold.
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"conform/big","params":{{"pad":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    for _ in 0..32 {
        peer.send_raw(&big).expect("queued");
    }
    assert_eq!(peer.recv(), Err(ReadError::Timeout));
    drop(peer);
    let took = started.elapsed();
    let _ = release.send(());
    server.join().expect("the server");
    // The reads wait `timeout`, the drop at most `timeout` more for the close.
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn a_closed_connection_is_seen_as_closed() {
    let (connect, server) = serve(|socket| {
        socket.close(None).expect("close");
        while socket.read().is_ok() {}
    });
    let mut peer = Peer::connect(&connect, Duration::from_secs(5)).expect("connects");
    assert_eq!(peer.recv(), Err(ReadError::Closed));
    assert!(
        peer.stderr_hint().contains("the server closed the connection"),
        "{}",
        peer.stderr_hint()
    );
    server.join().expect("the server");
}
