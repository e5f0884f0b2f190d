//! Issue #49: three replicas of `governed-server --listen` (built with feature `postgres`) on
//! one PostgreSQL database, each with its own `AGENTACP_REPLICA` and its own state folder, so
//! that only the database joins them. A session made through one is listed, loaded and
//! prompted through the others; two prompting one session at once: one runs, one is told
//! busy, and a cancel sent to the other replica reaches the turn; `kill -9` of a replica in
//! the middle of a streaming turn: its lease expires, the turn is recorded interrupted, the
//! session goes on elsewhere with its history up to the crash, nothing lost or duplicated, and
//! the audit chains verify; the database restarted under load: requests fail in sentences,
//! then succeed again, nothing half-written; a token revoked in the database (replicas with
//! `AGENTACP_TOKENS=database`) ends the turns it runs on the other replicas within the
//! documented bound and is refused by all three; and docs/deploy.md's nginx configuration,
//! TLS and cookie affinity included, in front of the three.
//!
//! Without PostgreSQL's server programs (or without feature `postgres`) the tests skip, saying
//! so, and fail under CI's `AGENTACP_REQUIRE_PEERS`.

#![cfg(unix)]

/// Without feature `postgres` the replicas cannot share a database: say so (and fail in CI).
#[cfg(not(feature = "postgres"))]
#[test]
fn the_fleet_tests_need_feature_postgres() {
    test_support::skip_unless_required(
        "governed-server was built without feature `postgres`: run `cargo test -p governed-server --features postgres --test fleet`",
    );
}

#[cfg(feature = "postgres")]
#[path = "common/replicas.rs"]
mod replicas;

#[cfg(feature = "postgres")]
mod fleet {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use agentacp::client::{Client, ClientError, ClientOptions, PromptEvent, PromptStream};
    use agentacp::websocket::Dial;
    use agentacp::wire::default as wire;
    use serde_json::Value;
    use tokio::sync::RwLock;

    use crate::replicas::{Dirs, Replica, WAIT};

    /// The replicas' lease (`AGENTACP_LEASE_MS`): short, so that a takeover is quick here.
    const LEASE_MS: u64 = 1500;

    /// The answer a busy session gives to a prompt, on one replica as across replicas.
    const BUSY: &str = "a prompt is running in this session; cancel it or wait for its answer before prompting";

    /// The tests share the cluster; the one that restarts it runs alone.
    static CLUSTER_USE: RwLock<()> = RwLock::const_new(());

    /// A fresh database and three replicas on it; `None` (skipped) without PostgreSQL.
    fn fleet(test: &str) -> Option<(&'static test_support::postgres::Cluster, String, Dirs, Vec<Replica>)> {
        fleet_with(test, &[])
    }

    /// [`fleet`], each replica with `env` added to its environment.
    fn fleet_with(
        test: &str,
        env: &[(&str, &str)],
    ) -> Option<(&'static test_support::postgres::Cluster, String, Dirs, Vec<Replica>)> {
        let cluster = test_support::postgres::cluster()?;
        let database = cluster.database(test);
        let dirs = Dirs::new();
        let replicas = ["a", "b", "c"]
            .into_iter()
            .map(|name| Replica::start_with(name, Some(&database), &dirs, LEASE_MS, env))
            .collect();
        Some((cluster, database, dirs, replicas))
    }

    async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
        tokio::time::timeout(WAIT, future)
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
    }

    /// The texts of a stream's updates (live or replayed) until it ends; its stop reason.
    async fn read_all(stream: PromptStream) -> (Vec<String>, Option<wire::StopReason>) {
        outcome(stream)
            .await
            .unwrap_or_else(|error| panic!("the stream failed: {error}"))
    }

    /// The texts of a stream's updates until it ends, and its stop reason; or the error that
    /// ended it.
    async fn outcome(mut stream: PromptStream) -> Result<(Vec<String>, Option<wire::StopReason>), ClientError> {
        let mut texts = Vec::new();
        loop {
            match within("the stream's next event", stream.next()).await {
                Some(Ok(PromptEvent::Update(update) | PromptEvent::Replay(update))) => {
                    texts.extend(update.text().map(str::to_string));
                }
                Some(Ok(PromptEvent::Stop(reason))) => return Ok((texts, Some(reason))),
                Some(Ok(PromptEvent::Loaded)) | None => return Ok((texts, None)),
                Some(Err(error)) => return Err(error),
            }
        }
    }

    /// The prompt's text answer (one turn, ended `end_turn`).
    async fn prompt(client: &Client, session: &wire::SessionId, text: &str) -> String {
        let stream = within("prompt", client.prompt_text(session, text)).await.unwrap();
        let (texts, stop) = read_all(stream).await;
        assert_eq!(stop, Some(wire::StopReason::EndTurn), "{texts:?}");
        texts.concat()
    }

    /// The history `session/load` replays through `client`.
    async fn history(client: &Client, session: &wire::SessionId, cwd: &Path) -> Vec<String> {
        let stream = within("load", client.load_session(session, cwd)).await.unwrap();
        read_all(stream).await.0
    }

    /// Waits until the stream's first `tick`.
    async fn first_tick(stream: &mut PromptStream) {
        loop {
            match within("a tick", stream.next()).await {
                Some(Ok(PromptEvent::Update(update))) if update.text().is_some_and(|t| t.starts_with("tick")) => {
                    return;
                }
                Some(Ok(_)) => {}
                other => panic!("the turn ended before its first tick: {other:?}"),
            }
        }
    }

    /// The error of a request that failed (in a sentence, as the agent said it).
    fn said(error: &ClientError) -> String {
        error.rpc().map_or_else(|| error.to_string(), |rpc| rpc.message.clone())
    }

    /// The audit records of every replica, as JSON, from their chains in the database, after
    /// `verify_database` checked every chain.
    fn audit_records(database: &str) -> Vec<Value> {
        let db = acp_postgres::Database::connect(database, acp_postgres::Options::default()).unwrap();
        let chains = acp_audit::database_chains(&db).unwrap();
        assert!(
            !chains.is_empty(),
            "the replicas keep their audit chains in the database"
        );
        for verdict in acp_audit::verify_database(&db, None).unwrap() {
            assert!(verdict.result.is_ok(), "chain {}: {:?}", verdict.chain, verdict.result);
        }
        db.run(|c| c.query("select line from agentacp_audit_records order by chain, seq", &[]))
            .unwrap()
            .iter()
            .map(|row| serde_json::from_str(row.get(0)).unwrap())
            .collect()
    }

    /// `tick N` lines of a history, as numbers.
    fn ticks(history: &[String]) -> Vec<u64> {
        history
            .iter()
            .filter_map(|text| text.strip_prefix("tick ").and_then(|n| n.parse().ok()))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_made_through_one_replica_is_listed_loaded_and_prompted_through_the_others() {
        let _shared = CLUSTER_USE.read().await;
        let Some((_cluster, _db, dirs, replicas)) = fleet("fleet_any_replica") else {
            return;
        };
        let a = replicas[0].client(&dirs).await;
        let session = within("session/new", a.new_session(&dirs.project)).await.unwrap();
        assert_eq!(prompt(&a, &session, "hello from a").await, "hello from a");

        let b = replicas[1].client(&dirs).await;
        let listed = within("session/list", b.list_all_sessions(None, 10)).await.unwrap();
        assert!(
            listed.iter().any(|info| info.session_id == session),
            "B lists the session made through A: {listed:?}"
        );
        let replayed = history(&b, &session, &dirs.project).await;
        assert_eq!(
            replayed,
            ["hello from a", "hello from a"],
            "the user's prompt, then the answer"
        );
        assert_eq!(prompt(&b, &session, "hello from b").await, "hello from b");

        let c = replicas[2].client(&dirs).await;
        within("session/resume", c.resume_session(&session, &dirs.project))
            .await
            .unwrap();
        assert_eq!(prompt(&c, &session, "hello from c").await, "hello from c");
        let replayed = history(&c, &session, &dirs.project).await;
        assert_eq!(
            replayed,
            [
                "hello from a",
                "hello from a",
                "hello from b",
                "hello from b",
                "hello from c",
                "hello from c"
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_replicas_prompting_one_session_at_once_one_runs_the_other_is_busy_and_cancels_it() {
        let _shared = CLUSTER_USE.read().await;
        let Some((_cluster, _db, dirs, replicas)) = fleet("fleet_busy") else {
            return;
        };
        let a = replicas[0].client(&dirs).await;
        let session = within("session/new", a.new_session(&dirs.project)).await.unwrap();
        let b = replicas[1].client(&dirs).await;
        within("session/resume", b.resume_session(&session, &dirs.project))
            .await
            .unwrap();

        let mut running = within("prompt on A", a.prompt_text(&session, "/forever"))
            .await
            .unwrap();
        first_tick(&mut running).await;
        let refused = within("prompt on B", b.prompt_text(&session, "hello")).await.unwrap();
        let error = match outcome(refused).await {
            Err(error) => error,
            Ok(ran) => panic!("B ran a second turn of a running session: {ran:?}"),
        };
        assert_eq!(said(&error), BUSY, "{error}");

        // A cancel sent to B reaches the turn running on A.
        within("session/cancel on B", b.cancel(&session)).await.unwrap();
        let (_, stop) = tokio::time::timeout(WAIT, read_all(running))
            .await
            .expect("the cancel sent to B reached the turn running on A");
        assert_eq!(stop, Some(wire::StopReason::Cancelled));
        // The lease is free again: B runs the next turn.
        assert_eq!(prompt(&b, &session, "after").await, "after");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replica_killed_mid_turn_leaves_the_turn_interrupted_and_the_session_goes_on_elsewhere() {
        let _shared = CLUSTER_USE.read().await;
        let Some((_cluster, database, dirs, mut replicas)) = fleet("fleet_kill") else {
            return;
        };
        let a = replicas[0].client(&dirs).await;
        let session = within("session/new", a.new_session(&dirs.project)).await.unwrap();
        let mut running = within("prompt on A", a.prompt_text(&session, "/forever"))
            .await
            .unwrap();
        let mut seen = 0u64;
        while seen < 200 {
            match within("a tick", running.next()).await {
                Some(Ok(PromptEvent::Update(update))) => {
                    if let Some(n) = update.text().and_then(|t| t.strip_prefix("tick ")) {
                        assert_eq!(n.parse::<u64>().unwrap(), seen);
                        seen += 1;
                    }
                }
                other => panic!("the turn ended early: {other:?}"),
            }
        }
        replicas[0].kill();
        drop(running);

        let b = replicas[1].client(&dirs).await;
        let before = history(&b, &session, &dirs.project).await;
        let recorded = ticks(&before);
        // The history's updates are written in batches (docs/store.md, "Durability"): a killed
        // replica loses at most the last few milliseconds of its turn, never more than 2,500
        // updates, and never leaves a gap.
        assert!(
            recorded.len() as u64 + 2_500 >= seen && !recorded.is_empty(),
            "the ticks the client saw are in the history, but for the last few"
        );
        assert_eq!(
            recorded,
            (0..recorded.len() as u64).collect::<Vec<_>>(),
            "no tick lost or duplicated"
        );

        // B answers busy while A's lease runs, then takes the session over.
        let deadline = Instant::now() + Duration::from_millis(LEASE_MS) + WAIT;
        let answer = loop {
            let stream = within("prompt on B", b.prompt_text(&session, "hello again"))
                .await
                .unwrap();
            match outcome(stream).await {
                Err(error) if said(&error) == BUSY && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("B could not take the session over: {error}"),
                Ok((texts, stop)) => {
                    assert_eq!(stop, Some(wire::StopReason::EndTurn));
                    break texts.concat();
                }
            }
        };
        assert_eq!(answer, "hello again");

        let after = history(&b, &session, &dirs.project).await;
        assert_eq!(
            &after[..before.len()],
            &before[..],
            "the history up to the crash is kept"
        );
        // A batch A committed as it was killed may land after `before` was read, but never
        // after the takeover (the fence): its ticks come before the marker, without a gap.
        let marker = after
            .iter()
            .position(|line| line.contains("interrupted: replica a stopped"))
            .unwrap_or_else(|| panic!("no interruption marker: {after:?}"));
        let kept = ticks(&after[..marker]);
        assert_eq!(
            kept,
            (0..kept.len() as u64).collect::<Vec<_>>(),
            "no tick lost or duplicated up to the marker"
        );
        assert_eq!(&after[marker + 1..], ["hello again", "hello again"]);

        let records = audit_records(&database);
        let interrupted: Vec<&Value> = records.iter().filter(|r| r["action"] == "turn.interrupted").collect();
        assert_eq!(interrupted.len(), 1, "{interrupted:?}");
        let record = interrupted[0];
        assert_eq!(record["subject"]["ref"], session.to_string());
        assert_eq!(record["input"]["replica"], "a");
        assert_eq!(record["input"]["epoch"], 1);
        // B's prompt, or the sweeper of B or C, whichever came first after the expiry.
        let by = &record["input"]["takenOverBy"];
        assert!(by == "b" || by == "c", "{record}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_database_restarted_under_load_fails_requests_in_sentences_then_serves_again() {
        let _alone = CLUSTER_USE.write().await;
        let Some((cluster, database, dirs, replicas)) = fleet("fleet_restart") else {
            return;
        };
        let clients = [replicas[0].client(&dirs).await, replicas[1].client(&dirs).await];
        let mut sessions = Vec::new();
        for client in &clients {
            sessions.push(within("session/new", client.new_session(&dirs.project)).await.unwrap());
        }
        // Load: each client prompts in turn while the database goes away and comes back.
        let mut failures = Vec::new();
        let mut answered = Vec::new();
        let mut stopped = false;
        for round in 0..40 {
            if round == 10 {
                cluster.stop().unwrap();
                stopped = true;
            }
            if round == 20 {
                cluster.start_again().unwrap();
                stopped = false;
            }
            for (client, session) in clients.iter().zip(&sessions) {
                let text = format!("round {round}");
                let answer = async {
                    let stream = client.prompt_text(session, &text).await?;
                    outcome(stream).await.map(|(texts, _)| texts.concat())
                };
                match within("a prompt", answer).await {
                    Ok(answer) if answer == text => answered.push((session.clone(), text)),
                    Ok(answer) => panic!("round {round}: answered `{answer}`"),
                    Err(error) => {
                        assert!(stopped || round < 25, "round {round} failed after the restart: {error}");
                        failures.push(said(&error));
                    }
                }
            }
        }
        assert!(!failures.is_empty(), "the outage was felt");
        for failure in &failures {
            assert!(
                failure.contains("database") && !failure.contains("Error {") && !failure.contains("password"),
                "not a sentence about the database: {failure}"
            );
        }
        // The last rounds all went through.
        assert!(answered.iter().filter(|(_, text)| text == "round 39").count() == 2);
        // Nothing half-written: each answered turn is in its session's history, the prompt
        // then its answer, and nothing else but whole turns.
        let reader = replicas[2].client(&dirs).await;
        // A replica idle through the restart finds its connections to the database broken at
        // its first requests after it (its audit chain's connection is taken again at most
        // once a second): those fail, in a sentence, until it has recovered; none after.
        let deadline = Instant::now() + WAIT;
        loop {
            let load = within("session/load", reader.load_session(&sessions[0], &dirs.project)).await;
            match async { outcome(load?).await }.await {
                Ok(_) => break,
                Err(error) => {
                    let said = said(&error);
                    assert!(said.contains("database"), "not a sentence about the database: {said}");
                    assert!(Instant::now() < deadline, "replica c never recovered: {said}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        for session in &sessions {
            let replayed = history(&reader, session, &dirs.project).await;
            let turns: Vec<&String> = answered.iter().filter(|(s, _)| s == session).map(|(_, t)| t).collect();
            for text in &turns {
                let at = replayed
                    .iter()
                    .position(|line| line == *text)
                    .unwrap_or_else(|| panic!("`{text}` is missing from {replayed:?}"));
                assert_eq!(replayed.get(at + 1), Some(*text), "its answer follows it");
            }
            // Every line is a prompt that was sent, or its answer: no torn or foreign row.
            for line in &replayed {
                let round: Option<u32> = line.strip_prefix("round ").and_then(|n| n.parse().ok());
                assert!(round.is_some_and(|n| n < 40), "`{line}` in {replayed:?}");
            }
        }
        let _ = audit_records(&database);
    }

    /// The bound docs/deploy.md gives for a revocation to hold on every replica when its
    /// notification was missed (the poll, 5 s, plus the 2 s check): generous for the notified
    /// path the replicas take here (milliseconds).
    const REVOKED_WITHIN: Duration = Duration::from_secs(7);

    /// The identity the fleet's token is issued to.
    const IDENTITY: &str = "ci-bot";

    /// The chains (replicas) whose audit records include one with `action`, once every
    /// replica in `replicas` has one (the audit writer commits after the fact), within [`WAIT`].
    async fn audited_by(database: &str, action: &str, replicas: &[&str]) -> Vec<String> {
        let db = acp_postgres::Database::connect(database, acp_postgres::Options::default()).unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let action = action.to_string();
            let chains: Vec<String> = db
                .run(move |c| {
                    c.query(
                        "select distinct chain from agentacp_audit_records where line::jsonb ->> 'action' = $1 order by 1",
                        &[&action],
                    )
                })
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            let all = replicas
                .iter()
                .all(|replica| chains.iter().any(|chain| chain.ends_with(&format!("@{replica}"))));
            if all || Instant::now() >= deadline {
                return chains;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Issue #49: "a revocation on one replica refuses the token on the others within the
    /// documented bound". Three replicas with `AGENTACP_TOKENS=database`; a token issued in the
    /// database is taken by all three; it is revoked in the database as `scaffold-aip token
    /// revoke --database` revokes it (the same function, in one transaction that announces
    /// it) while the identity's turns run on replicas b and c: both turns end cancelled within
    /// the bound, the revocation is audited by both, the connections' next requests are
    /// refused, and a new connection with the token is refused `401` by every replica.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_revoked_in_the_database_is_refused_by_every_replica_and_ends_the_turns_it_runs() {
        let _shared = CLUSTER_USE.read().await;
        let Some((_cluster, database, dirs, replicas)) = fleet_with("fleet_revoke", &[("AGENTACP_TOKENS", "database")])
        else {
            return;
        };
        let admin = acp_postgres::Database::connect(&database, acp_postgres::Options::default()).unwrap();
        acp_tokens::database::prepare(&admin).unwrap();
        let token = acp_tokens::generate_token().unwrap();
        acp_tokens::database::issue(
            &admin,
            IDENTITY,
            acp_tokens::digest(&token),
            acp_tokens::database::Others::Refuse,
        )
        .unwrap();

        // Taken by every replica; a turn of the identity runs on b and on c.
        let mut clients = Vec::new();
        for replica in &replicas {
            let client = replica
                .connect(&dirs, Some(&token))
                .await
                .unwrap_or_else(|e| panic!("replica {} refused the token: {e}", replica.name));
            clients.push(client);
        }
        let mut turns = Vec::new();
        for client in &clients[1..] {
            let session = within("session/new", client.new_session(&dirs.project)).await.unwrap();
            let mut turn = within("prompt", client.prompt_text(&session, "/forever"))
                .await
                .unwrap();
            first_tick(&mut turn).await;
            turns.push(turn);
        }

        let revoked = acp_tokens::database::revoke(&admin, IDENTITY).unwrap();
        assert_eq!(revoked, 1, "the token issued above");
        let (on_c, on_b) = (turns.pop().unwrap(), turns.pop().unwrap());
        let ended = tokio::time::timeout(REVOKED_WITHIN, async { tokio::join!(read_all(on_b), read_all(on_c)) })
            .await
            .unwrap_or_else(|_| panic!("the turns on b and c still ran {REVOKED_WITHIN:?} after the revocation"));
        for (replica, (_, stop)) in ["b", "c"].into_iter().zip([ended.0, ended.1]) {
            assert_eq!(stop, Some(wire::StopReason::Cancelled), "the turn on {replica}");
        }
        let chains = audited_by(&database, "auth.revoked", &["b", "c"]).await;
        for replica in ["b", "c"] {
            assert!(
                chains.iter().any(|chain| chain.ends_with(&format!("@{replica}"))),
                "replica {replica} audited the revocation: {chains:?}"
            );
        }
        // The connections that showed the token act for nobody now: asked to authenticate.
        for client in &clients[1..] {
            let refused = within("session/list", client.list_all_sessions(None, 10)).await;
            let code = refused.as_ref().err().and_then(|error| error.rpc()).map(|rpc| rpc.code);
            assert_eq!(code, Some(-32000), "a revoked connection listed sessions: {refused:?}");
        }
        // A new connection with the token: refused by every replica, the one that heard of
        // the revocation last included.
        for replica in &replicas {
            match replica.connect(&dirs, Some(&token)).await {
                Ok(_) => panic!("replica {} took a revoked token", replica.name),
                Err(error) => assert!(error.to_string().contains("401"), "replica {}: {error}", replica.name),
            }
        }
    }

    /// The nginx configuration of docs/deploy.md (between its BEGIN and END lines), as it
    /// stands but for paths and ports: its `listen 443 ssl` listens on a loopback port (still
    /// `ssl`), its certificate lines name `tls`'s files, and the three upstream servers are the
    /// replicas' addresses. Each of those must be in the docs' text, or the test fails.
    fn nginx_conf_from_the_docs(port: u16, replicas: &[Replica], tls: &ProxyTls, dir: &Path) -> String {
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/deploy.md")).unwrap();
        let block = docs
            .split("# BEGIN agentacp nginx\n")
            .nth(1)
            .and_then(|rest| rest.split("# END agentacp nginx").next())
            .expect("docs/deploy.md has the nginx block");
        let mut conf = block.to_string();
        let mut substitute = |from: &str, to: &str| {
            assert!(
                conf.contains(from),
                "docs/deploy.md's nginx block no longer has `{from}`"
            );
            conf = conf.replace(from, to);
        };
        substitute("listen 443 ssl;", &format!("listen 127.0.0.1:{port} ssl;"));
        substitute("/etc/ssl/agents/fullchain.pem", &tls.chain.display().to_string());
        substitute("/etc/ssl/agents/privkey.pem", &tls.key.display().to_string());
        for (n, replica) in replicas.iter().enumerate() {
            let addr = replica.url.trim_start_matches("ws://").trim_end_matches("/acp");
            substitute(&format!("127.0.0.1:870{}", n + 1), addr);
        }
        let dir = dir.display();
        format!(
            "pid {dir}/nginx.pid;\nerror_log {dir}/error.log;\nevents {{}}\nhttp {{\naccess_log off;\n\
             client_body_temp_path {dir}/body;\nproxy_temp_path {dir}/proxy;\nfastcgi_temp_path {dir}/fastcgi;\n\
             uwsgi_temp_path {dir}/uwsgi;\nscgi_temp_path {dir}/scgi;\n{conf}}}\n"
        )
    }

    /// The proxy's TLS, made at test time: a private CA, and a certificate for 127.0.0.1
    /// signed by it (PEM files for nginx); clients trust the CA only.
    struct ProxyTls {
        /// The certificate chain nginx serves (the server's certificate, then the CA's).
        chain: PathBuf,
        /// The server certificate's private key.
        key: PathBuf,
        /// A dial whose roots hold the CA (and the webpki roots), its URL left to set.
        trusting: Dial,
    }

    impl ProxyTls {
        /// A CA and a certificate for 127.0.0.1, written into `dir`.
        fn new(dir: &Path) -> ProxyTls {
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca.distinguished_name
                .push(rcgen::DnType::CommonName, "agentacp fleet test CA");
            let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
                .unwrap()
                .signed_by(&key, &ca)
                .unwrap();
            let mut trusting = Dial::new(String::new());
            trusting.tls = Some(agentacp::websocket::client_config(std::slice::from_ref(ca.der())).unwrap());
            let tls = ProxyTls {
                chain: dir.join("fullchain.pem"),
                key: dir.join("privkey.pem"),
                trusting,
            };
            std::fs::write(&tls.chain, format!("{}{}", server.pem(), ca.pem())).unwrap();
            std::fs::write(&tls.key, key.serialize_pem()).unwrap();
            tls
        }

        /// `url` dialed trusting the CA (only it and the webpki roots).
        fn dial(&self, url: String) -> Dial {
            Dial {
                url,
                ..self.trusting.clone()
            }
        }
    }

    /// nginx, when installed (Debian's `nginx`; CI installs it), else `None` after saying so.
    fn nginx() -> Option<PathBuf> {
        let found = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.exists());
        if found.is_none() {
            test_support::skip_unless_required("nginx is not installed (Debian: apt-get install nginx)");
        }
        found
    }

    /// nginx running a configuration, stopped on drop.
    struct Nginx(Child, PathBuf);

    impl Drop for Nginx {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = std::fs::remove_file(self.1.join("nginx.pid"));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nginx_with_tls_and_cookie_affinity_from_docs_deploy_md_serves_the_fleet() {
        let _shared = CLUSTER_USE.read().await;
        let Some(binary) = nginx() else { return };
        let Some((_cluster, _db, dirs, replicas)) = fleet("fleet_nginx") else {
            return;
        };
        let dir = dirs.base.join("nginx");
        std::fs::create_dir_all(&dir).unwrap();
        // nginx's workers run as `nobody` when started as root: they write its temp folders.
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let tls = ProxyTls::new(&dir);
        std::fs::write(
            dir.join("nginx.conf"),
            nginx_conf_from_the_docs(port, &replicas, &tls, &dir),
        )
        .unwrap();
        let child = Command::new(&binary)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let _nginx = Nginx(child, dir.clone());
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nginx did not listen:\n{log}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // TLS ends at nginx, with a certificate a client must trust: without the CA among its
        // roots, a client is refused, saying why.
        let https = format!("https://127.0.0.1:{port}/acp");
        let options = ClientOptions::default().with_workspace_root(dirs.root.clone());
        let untrusted = within(
            "connect without trusting the CA",
            Client::connect_http(Dial::new(https.clone()), options.clone()),
        )
        .await;
        match untrusted {
            Ok(_) => panic!("a client that does not trust the CA connected"),
            Err(error) => assert!(error.to_string().contains("certificate"), "{error}"),
        }

        // Streamable HTTP over TLS: many requests per connection, each reaching the replica
        // that opened it only through the affinity cookie (`Secure`: sent over https only; a
        // request elsewhere is `404`).
        let http = within(
            "connect over HTTPS",
            Client::connect_http(tls.dial(https), options.clone()),
        )
        .await
        .unwrap();
        let session = within("session/new", http.new_session(&dirs.project)).await.unwrap();
        for n in 0..5 {
            let text = format!("through nginx {n}");
            assert_eq!(prompt(&http, &session, &text).await, text);
        }
        // A WebSocket over TLS through nginx, wherever it lands, has the session.
        let wss = format!("wss://127.0.0.1:{port}/acp");
        let ws = within(
            "connect over WebSocket",
            Client::connect_websocket(tls.dial(wss), options),
        )
        .await
        .unwrap();
        let replayed = history(&ws, &session, &dirs.project).await;
        assert_eq!(replayed.len(), 10, "{replayed:?}");
        assert_eq!(prompt(&ws, &session, "over the websocket").await, "over the websocket");
    }
}
