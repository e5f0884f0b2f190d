//! Issue #49: bearer tokens in PostgreSQL (`AGENTACP_TOKENS=database`), so that a revocation
//! holds on every replica. Two token stores on one database stand for two replicas; the
//! changes are made as `scaffold-aip token --database` makes them (`acp_tokens::database`).
//! With a real PostgreSQL server (`test_support::postgres`): skipped, saying so, without one.
//! Every wait is for an event, bounded by [`WAIT`]; the delays measured are printed, not
//! asserted.

#![cfg(all(feature = "postgres", feature = "websocket"))]

use std::time::{Duration, Instant};

use acp_postgres::{Database, Options};
use acp_tokens::database as tokens;
use agentacp::auth::{Identity, TokenStore};
use agentacp::prelude::*;
use agentacp::server::SessionContext;
use common::listening::Listening;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

mod common;

scripted_remote!();

const WAIT: Duration = Duration::from_secs(10);

/// A poll period long enough that a test passing under it did not need the poll.
const NO_POLL: Duration = Duration::from_secs(3600);

/// A pool on `url`, as one replica (or the CLI) opens it.
fn connect(url: &str) -> Database {
    Database::connect(url, Options::default()).expect("the test database answers")
}

/// A pool on `url` with the tokens' schema applied, as `scaffold-aip token --database` opens it.
fn admin(url: &str) -> Database {
    let database = connect(url);
    tokens::prepare(&database).unwrap();
    database
}

/// A replica's token store on `url`, polling every `poll`.
fn replica(url: &str, poll: Duration) -> TokenStore {
    TokenStore::from_database_polled(connect(url), poll).expect("the token store opens")
}

/// Issues a token for `identity` as `scaffold-aip token new --database` does; the token.
fn issue(admin: &Database, identity: &str) -> String {
    let token = agentacp::auth::generate_token().unwrap();
    tokens::issue(admin, identity, acp_tokens::digest(&token), tokens::Others::Refuse).unwrap();
    token
}

fn alice() -> Identity {
    Identity::new("alice").unwrap()
}

/// What says when `store` learns of a revocation: taken before the revocation is made.
fn revocations(store: &TokenStore) -> tokio::sync::watch::Receiver<u64> {
    store.revocations().expect("a database store says when it learns")
}

/// Waits until the store of `revocations` learns of a revocation; how long since `since`.
async fn learned(mut revocations: tokio::sync::watch::Receiver<u64>, since: Instant) -> Duration {
    tokio::time::timeout(WAIT, revocations.changed())
        .await
        .expect("the revocation reached the replica in time")
        .unwrap();
    since.elapsed()
}

/// A token issued through one replica's database is taken by another at once; revoked, it is
/// refused to new connections at once, and a live connection's check fails once the
/// notification arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_issued_and_revoked_in_the_database_holds_on_every_replica() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("tokens_replicas");
    let (a, b) = (replica(&url, NO_POLL), replica(&url, NO_POLL));
    let admin = admin(&url);
    let token = issue(&admin, "alice");
    for store in [&a, &b] {
        assert_eq!(store.check(&token), Ok(Some(alice())));
        assert!(store.still_proves(&alice(), &token));
    }
    assert_eq!(b.check("acp_not-a-token"), Ok(None));
    let (on_a, on_b) = (revocations(&a), revocations(&b));

    let revoked_at = Instant::now();
    tokens::revoke(&admin, "alice").unwrap();
    assert_eq!(b.check(&token), Ok(None), "a new connection is refused at once");
    let after = learned(on_b, revoked_at).await;
    eprintln!("replica B learned the revocation after {after:?}");
    assert!(!b.still_proves(&alice(), &token), "B still takes the revoked token");
    learned(on_a, revoked_at).await;
    assert!(!a.still_proves(&alice(), &token), "A still takes the revoked token");
}

/// The listening connection cut (as a database restart or a network cut does), a revocation
/// made meanwhile is not announced to it: the replica reads every revocation again when it
/// listens again, so the token is refused without waiting for the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_missed_while_the_listener_was_cut_is_read_when_it_listens_again() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("tokens_listener_cut");
    let b = replica(&url, NO_POLL);
    let admin = admin(&url);
    let token = issue(&admin, "alice");
    assert_eq!(b.check(&token), Ok(Some(alice())));
    let on_b = revocations(&b);
    // The revocation commits while the listener's connection is being cut: it cannot reach
    // that connection (gone), and the new one listens only after a pause.
    let revoked_at = Instant::now();
    let cut: i64 = admin
        .run(|client| {
            let mut tx = client.transaction()?;
            let cut = tx.query_one(
                "select count(pg_terminate_backend(pid)) from pg_stat_activity
                 where datname = current_database() and query ilike 'listen %'",
                &[],
            )?;
            tx.commit()?;
            Ok(cut.get(0))
        })
        .unwrap();
    assert_eq!(cut, 1, "one listening connection");
    tokens::revoke(&admin, "alice").unwrap();
    let after = learned(on_b, revoked_at).await;
    eprintln!("a revocation missed by the cut listener was read after {after:?}");
    assert!(!b.still_proves(&alice(), &token));
}

/// A revocation written without a notification (by hand, in SQL) is found by the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_without_a_notification_is_found_by_the_poll() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("tokens_poll");
    let b = replica(&url, Duration::from_millis(200));
    let admin = admin(&url);
    let token = issue(&admin, "alice");
    assert_eq!(b.check(&token), Ok(Some(alice())));
    let on_b = revocations(&b);
    let revoked_at = Instant::now();
    cluster
        .psql(
            &url,
            "update agentacp_tokens set revoked_at = now() where identity = 'alice'",
        )
        .unwrap();
    let after = learned(on_b, revoked_at).await;
    eprintln!("a revocation without a notification was polled after {after:?}");
    assert!(!b.still_proves(&alice(), &token));
}

/// Replica B serves alice, whose token was issued in the database; her turn runs on B when
/// the token is revoked through the database: the turn is cancelled, the revocation audited,
/// and a new connection with the token is refused `401`. B polls every hour, and its
/// connections check their token between requests only as often as it polls: the turn ends
/// within [`WAIT`] only because the revocation's notification wakes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_in_the_database_ends_a_running_turn_on_another_replica() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("tokens_server_revoke");
    let admin = admin(&url);
    let token = issue(&admin, "alice");
    let server = Listening::start(Remote, |options| options.tokens(replica(&url, NO_POLL))).await;
    let mut peer = Peer::connect(&server, Some(&token))
        .await
        .expect("alice's token is taken");
    peer.call("initialize", json!({"protocolVersion": 1})).await;
    let (_, session) = peer
        .call("session/new", json!({"cwd": server.cwd(), "mcpServers": []}))
        .await;
    let session = session["result"]["sessionId"].clone();
    let prompt = peer
        .send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "/wait"}]}),
        )
        .await;
    peer.until(|message| message.to_string().contains("waiting")).await;

    let revoked_at = Instant::now();
    tokens::revoke(&admin, "alice").unwrap();
    let ended = peer.until(|message| message["id"] == prompt).await;
    eprintln!(
        "the turn on replica B ended {:?} after the revocation",
        revoked_at.elapsed()
    );
    assert_eq!(ended["result"]["stopReason"], "cancelled", "{ended}");
    assert!(server.recorded("auth.revoked").await, "the revocation is audited");
    let refused = upgrade_status(&server, &token).await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    server.shut_down().await;
}

/// While replica B cannot reach the database, a new connection's token cannot be checked: it
/// is refused `503` with a sentence on the upgrade, and `authenticate` fails with one; it is
/// taken again once the database answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_cannot_be_checked_is_refused_with_a_sentence() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("tokens_database_down");
    let name = url.rsplit('/').next().unwrap().to_string();
    let admin = admin(&url);
    let token = issue(&admin, "alice");
    let server = Listening::start(Remote, |options| options.tokens(replica(&url, NO_POLL))).await;
    let mut unauthenticated = Peer::connect(&server, None).await.unwrap();
    unauthenticated.call("initialize", json!({"protocolVersion": 1})).await;

    // The database refuses every connection and cuts those open: down, for this replica.
    let control = cluster.url("postgres");
    cluster
        .psql(
            &control,
            &format!(
                "alter database {name} allow_connections false;
                 select pg_terminate_backend(pid) from pg_stat_activity where datname = '{name}';"
            ),
        )
        .unwrap();
    let refused = upgrade_status(&server, &token).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("the token cannot be checked now"), "{refused}");
    assert!(refused.contains("try again later"), "{refused}");
    let params = json!({"methodId": "bearer", "_meta": {"agentacp": {"token": token}}});
    let (_, answer) = unauthenticated.call("authenticate", params.clone()).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("authentication failed: the token cannot be checked now"),
        "{answer}"
    );

    cluster
        .psql(&control, &format!("alter database {name} allow_connections true"))
        .unwrap();
    let (_, answer) = unauthenticated.call("authenticate", params).await;
    assert!(
        answer["result"].is_object(),
        "taken again once the database answers: {answer}"
    );
    server.shut_down().await;
}

/// The status line and body of a WebSocket upgrade showing `token`.
async fn upgrade_status(server: &Listening, token: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "GET /acp HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // A refusal is answered and closed; an accepted upgrade stays open (its head is enough).
    let _ = tokio::time::timeout(WAIT, async {
        let mut chunk = [0u8; 4096];
        while let Ok(read @ 1..) = stream.read(&mut chunk).await {
            answer.extend_from_slice(&chunk[..read]);
            if answer.starts_with(b"HTTP/1.1 101") && answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A WebSocket client of the listener.
struct Peer {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: i64,
}

impl Peer {
    async fn connect(server: &Listening, token: Option<&str>) -> Result<Peer, tokio_tungstenite::tungstenite::Error> {
        let mut request = format!("ws://{}/acp", server.addr).into_client_request().unwrap();
        if let Some(token) = token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("the upgrade was answered in time")?;
        Ok(Peer { ws, next_id: 0 })
    }

    /// Sends a request; its id.
    async fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.ws.send(Message::text(message.to_string())).await.unwrap();
        self.next_id
    }

    /// The next message that `wanted` takes, within [`WAIT`].
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let next = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the server sent in time");
            match next {
                Some(Ok(Message::Text(text))) => {
                    let message: Value = serde_json::from_str(&text).unwrap();
                    if wanted(&message) {
                        return message;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the connection ended: {other:?}"),
            }
        }
    }

    /// Sends a request; (its id, its answer).
    async fn call(&mut self, method: &str, params: Value) -> (i64, Value) {
        let id = self.send(method, params).await;
        let answer = self
            .until(|message| message["id"] == id && message.get("method").is_none())
            .await;
        (id, answer)
    }
}
