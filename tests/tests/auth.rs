//! Tokens and roles on real node processes: a cluster with auth refuses requests without a
//! known token, an agent token acts only as its actor in its namespaces, a reader only reads, a
//! revoked token fails from the next request on any node, health stays open, and `/metrics`
//! can require a token.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use api::client::ClientError;
use api::command::{Command, CreateBead, ListFilter, Query};
use api::commands::get::Get;
use api::commands::list::List;
use api::outcome::{Outcome, Refusal};
use futures::StreamExt;
use tests::{Cluster, http_get, json_of, strand_binary, wait_for};

/// Runs the CLI against `cluster` with `token` (if any) and `args`, nothing taken from this
/// process's environment that names an actor, a namespace or a token.
fn strand(cluster: &Cluster, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(strand_binary());
    command.args(["--endpoints", &cluster.endpoints().join(",")]).args(args);
    for variable in [
        "STRAND_TOKEN",
        "STRAND_ACTOR",
        "BEADS_ACTOR",
        "GC_SESSION_NAME",
        "GC_AGENT",
        "STRAND_NAMESPACE",
        "STRAND_CONFIG",
    ] {
        command.env_remove(variable);
    }
    if let Some(token) = token {
        command.env("STRAND_TOKEN", token);
    }
    command.output().expect("the strand binary runs")
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn create(title: &str) -> Command {
    Command::Create(CreateBead { title: title.into(), ..Default::default() })
}

/// Makes a token with the CLI (as `admin`) and answers it.
fn make_token(cluster: &Cluster, admin: &str, args: &[&str]) -> String {
    let mut full = vec!["auth", "token", "create"];
    full.extend_from_slice(args);
    full.push("--json");
    let made = json_of(&strand(cluster, Some(admin), &full));
    made["token"].as_str().unwrap().to_string()
}

fn refusal(result: Result<Outcome, ClientError>) -> Refusal {
    match result {
        Err(ClientError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_roles_bind_every_request() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let open = cluster.client();
    open.execute(create("before auth")).await.unwrap();

    let enabled = json_of(&strand(&cluster, None, &["auth", "enable", "--json"]));
    let admin = enabled["token"].as_str().unwrap().to_string();
    assert_eq!(enabled["role"], "admin");
    assert!(api::auth::is_well_formed(&admin), "{enabled}");
    // Enabling again is refused, with or without a token.
    let again = strand(&cluster, None, &["auth", "enable"]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(stderr(&again).contains("requires a token"), "{}", stderr(&again));

    // No token, or an unknown one: UNAUTHENTICATED, for writes, reads and status alike.
    let refused = refusal(open.execute(create("no token")).await);
    assert!(matches!(refused, Refusal::Unauthenticated(_)), "{refused}");
    assert!(matches!(refusal(open.query(Query::from(List(ListFilter::default()))).await), Refusal::Unauthenticated(_)));
    let stranger = cluster.client_with_token(cluster.endpoints(), "default", &api::client::generate_token());
    assert!(matches!(refusal(stranger.execute(create("stranger")).await), Refusal::Unauthenticated(_)));
    let plain = strand(&cluster, None, &["list"]);
    assert_eq!(plain.status.code(), Some(1));
    assert!(stderr(&plain).contains("--token"), "the error says what to do: {}", stderr(&plain));
    // Health stays open.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", cluster.endpoints()[0]))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .unwrap();
    assert_eq!(health.into_inner().status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    // An agent acts only as its actor, only in its namespaces.
    let made = strand(&cluster, Some(&admin), &["namespace", "create", "rig", "--prefix", "st"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let agent = make_token(&cluster, &admin, &["worker", "--role", "agent", "--namespace", "rig", "--actor", "alice"]);
    let created = json_of(&strand(&cluster, Some(&agent), &["--namespace", "rig", "create", "agent work", "--json"]));
    let id = created["id"].as_str().unwrap().to_string();
    let claimed = json_of(&strand(&cluster, Some(&agent), &["--namespace", "rig", "update", &id, "--claim", "--json"]));
    assert_eq!(claimed[0]["assignee"].as_str().or(claimed["assignee"].as_str()), Some("alice"), "{claimed}");
    let posing = strand(&cluster, Some(&agent), &["--namespace", "rig", "--actor", "bob", "close", &id]);
    assert_eq!(posing.status.code(), Some(1));
    assert!(stderr(&posing).contains("acts only as alice, not as bob"), "{}", stderr(&posing));
    let assigning = strand(&cluster, Some(&agent), &["--namespace", "rig", "update", &id, "--assignee", "bob"]);
    assert!(stderr(&assigning).contains("not as bob"), "no assigning as another: {}", stderr(&assigning));
    let elsewhere = strand(&cluster, Some(&agent), &["--namespace", "default", "list"]);
    assert_eq!(elsewhere.status.code(), Some(1));
    assert!(stderr(&elsewhere).contains("may use only namespace(s) rig"), "{}", stderr(&elsewhere));
    let purge = strand(&cluster, Some(&agent), &["--namespace", "rig", "purge", "--force"]);
    assert_eq!(purge.status.code(), Some(1), "{}", stderr(&purge));
    let listing = strand(&cluster, Some(&agent), &["auth", "token", "list"]);
    assert!(stderr(&listing).contains("needs an admin token"), "{}", stderr(&listing));
    // Its events name the actor its token fixes.
    let events = json_of(&strand(&cluster, Some(&agent), &["--namespace", "rig", "events", "--json"]));
    let actors: Vec<&str> = events.as_array().unwrap().iter().filter_map(|event| event["actor"].as_str()).collect();
    assert!(!actors.is_empty() && actors.iter().all(|actor| *actor == "alice"), "{events}");

    // A reader reads, and writes nothing.
    let reader = make_token(&cluster, &admin, &["auditor", "--role", "reader"]);
    let read = json_of(&strand(&cluster, Some(&reader), &["--namespace", "rig", "list", "--json"]));
    assert_eq!(read.as_array().unwrap().len(), 1, "{read}");
    let write = strand(&cluster, Some(&reader), &["--namespace", "rig", "create", "nope"]);
    assert!(stderr(&write).contains("reader role, which only reads"), "{}", stderr(&write));
    // Moving the leader needs an admin token; the agent's and the reader's are refused.
    let leader =
        cluster.client_with_token(cluster.endpoints(), "default", &admin).status(false).await.unwrap().leader_id;
    for (token, role) in [(&agent, "agent"), (&reader, "reader")] {
        let moved = strand(&cluster, Some(token), &["cluster", "move-leader", &leader.to_string()]);
        assert_eq!(moved.status.code(), Some(1), "{}", stderr(&moved));
        assert!(
            stderr(&moved).contains(&format!("has the {role} role; moving the leader needs an admin token")),
            "{}",
            stderr(&moved)
        );
    }
    let moved = strand(&cluster, Some(&admin), &["cluster", "move-leader", &leader.to_string()]);
    assert!(moved.status.success(), "{}", stderr(&moved));
    // So does a backup: the state holds token hashes.
    let backup = std::env::temp_dir().join(format!("strand-auth-test-{}.backup", std::process::id()));
    let refused = strand(&cluster, Some(&agent), &["snapshot", "save", backup.to_str().unwrap()]);
    assert!(stderr(&refused).contains("saving a snapshot needs an admin token"), "{}", stderr(&refused));
    assert!(!backup.exists(), "a refused save writes nothing");
    let saved = json_of(&strand(&cluster, Some(&admin), &["--json", "snapshot", "save", backup.to_str().unwrap()]));
    assert!(saved["counts"]["tokens"].as_u64().unwrap() >= 3, "{saved}");
    std::fs::remove_file(&backup).unwrap();
    let whoami = json_of(&strand(&cluster, Some(&reader), &["auth", "whoami", "--json"]));
    assert_eq!(whoami["token"]["name"], "auditor");

    // A revoked token fails from the next request, on every node: each node's client sends the
    // next write or read straight after the revocation was acknowledged.
    let tokens = json_of(&strand(&cluster, Some(&admin), &["auth", "token", "list", "--json"]));
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 3, "{tokens}");
    assert!(!tokens.to_string().contains(&agent[7..]), "a listing never shows a token");
    let per_node: Vec<_> = cluster
        .endpoints()
        .into_iter()
        .map(|endpoint| cluster.client_with_token(vec![endpoint], "rig", &agent))
        .collect();
    for client in &per_node {
        client.query(Query::from(Get { ids: vec![id.as_str().into()] })).await.unwrap();
    }
    let watcher = cluster.client_with_token(vec![cluster.endpoints()[2].clone()], "rig", &agent);
    let mut watch = Box::pin(watcher.watch(0, Vec::new()));
    watch.next().await.unwrap().unwrap();
    let revoked = strand(&cluster, Some(&admin), &["auth", "token", "revoke", "worker"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", stderr(&revoked));
    // Every replica logs the change on the audit target, naming the token that made it.
    for id in 1..=3 {
        wait_for("the revocation in each node's audit log", || async {
            let log = cluster.log(id);
            let line = log.lines().find(|line| line.contains("strand::audit") && line.contains("token revoked"))?;
            (line.contains("worker") && line.contains("admin")).then_some(())
        })
        .await;
    }
    for client in &per_node {
        let refused = refusal(client.execute(create("after revocation")).await);
        assert!(matches!(refused, Refusal::Unauthenticated(_)), "{refused}");
        let refused = refusal(client.query(Query::from(Get { ids: vec![id.as_str().into()] })).await);
        assert!(matches!(refused, Refusal::Unauthenticated(_)), "{refused}");
    }
    // An open watch stream ends with the refusal too.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            match watch.next().await {
                Some(Ok(_)) => continue,
                Some(Err(error)) => return error.to_string(),
                None => return "the stream ended without an error".to_string(),
            }
        }
    })
    .await
    .expect("the revoked watch ends");
    assert!(ended.contains("not known to this cluster"), "{ended}");

    // The last admin token cannot be revoked; disabling opens the cluster again.
    let last = strand(&cluster, Some(&admin), &["auth", "token", "revoke", "admin"]);
    assert!(stderr(&last).contains("last admin token"), "{}", stderr(&last));
    json_of(&strand(&cluster, Some(&admin), &["auth", "disable", "--json"]));
    open.execute(create("after disable")).await.unwrap();
    wait_for("the disable in the audit log", || async {
        let log = cluster.log(1);
        log.lines().any(|line| line.contains("strand::audit") && line.contains("auth disabled")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_require_a_token() {
    let cluster = Cluster::start(1, Some("metrics_auth = true\n"));
    cluster.wait_for_leader().await;
    let address = cluster.endpoints()[0].clone();
    let (status, _, _) = http_get(&address, "/metrics").await;
    assert!(status.contains(" 200 "), "open until auth is enabled: {status}");
    let admin = json_of(&strand(&cluster, None, &["auth", "enable", "--json"]))["token"].as_str().unwrap().to_string();
    let (status, headers, body) = http_get(&address, "/metrics").await;
    assert!(status.contains(" 401 "), "{status}");
    assert!(headers.contains("www-authenticate: bearer"), "{headers}");
    assert!(body.contains("requires a token"), "{body}");
    let reader = make_token(&cluster, &admin, &["prometheus", "--role", "reader"]);
    let page = authorized_get(&address, "/metrics", &reader).await;
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("strand_raft_term"), "{page}");
}

/// An HTTP/1.1 GET with a bearer token; answers the whole response.
async fn authorized_get(address: &str, path: &str, token: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8(response).unwrap()
}
