//! The compose cluster of `deploy/`: three containers of an image built `FROM scratch`, mutual
//! TLS between the nodes, TLS to clients, and auth enabled, started and removed by
//! `deploy/cluster.sh` as the README gives it; the operator commands (`member list`,
//! `cluster move-leader`, `snapshot save` and `status`, a fourth node joining with `cluster.sh
//! join`, `member remove`, a restore into a new cluster with `cluster.sh restore`, a lost quorum
//! recovered with `cluster.sh recover` and joined again) run against it over mutual TLS with the
//! admin token. A real Prometheus scrapes it with `deploy/prometheus.yml` and answers every
//! query of `deploy/grafana/strand.json` with data.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tests::{free_port, strand_binary, wait_for};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cluster.sh")
}

/// `deploy/cluster.sh` with this test's directory, project name and ports.
struct Deployment {
    dir: tempfile::TempDir,
    project: String,
    ports: [u16; 4],
}

impl Deployment {
    fn run(&self, args: &[&str]) -> Output {
        let mut command = Command::new(script());
        command
            .args(args)
            .env("STRAND_BIN", strand_binary())
            .env("STRAND_CLUSTER_DIR", self.dir.path())
            .env("STRAND_PROJECT", &self.project);
        for (index, port) in self.ports.iter().enumerate() {
            command.env(format!("STRAND_PORT_{}", index + 1), port.to_string());
        }
        command.output().expect("deploy/cluster.sh runs")
    }

    fn strand(&self, config: &Path, args: &[&str]) -> Output {
        let mut command = Command::new(strand_binary());
        for variable in ["STRAND_TOKEN", "STRAND_ENDPOINTS", "STRAND_CACERT", "STRAND_NAMESPACE", "STRAND_ACTOR"] {
            command.env_remove(variable);
        }
        command.env("STRAND_CONFIG", config).args(args).output().expect("strand runs")
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let down = self.run(&["down"]);
        if !down.status.success() {
            eprintln!("cluster.sh down: {}", String::from_utf8_lossy(&down.stderr));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_runs_with_mutual_tls_and_auth() {
    let deployment = Deployment {
        dir: tempfile::tempdir().unwrap(),
        project: format!("strandtest{}", std::process::id()),
        ports: [free_port(), free_port(), free_port(), free_port()],
    };
    let up = deployment.run(&["up"]);
    assert!(up.status.success(), "cluster.sh up: {}", String::from_utf8_lossy(&up.stderr));
    let config = deployment.dir.path().join("client.toml");

    let created = deployment.strand(&config, &["create", "in a container", "--json"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let status = deployment.strand(&config, &["cluster", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{status}");
    assert!(nodes.iter().all(|node| node["peer_address"].as_str().unwrap().ends_with(":7500")), "{status}");
    let whoami = deployment.strand(&config, &["auth", "whoami", "--json"]);
    let whoami: serde_json::Value = serde_json::from_slice(&whoami.stdout).unwrap();
    assert_eq!((whoami["enabled"].as_bool(), whoami["token"]["role"].as_str()), (Some(true), Some("admin")));

    prometheus_scrapes_the_cluster_and_answers_every_dashboard_query(&deployment).await;

    // The operator commands over mutual TLS with the admin token: move the leadership to another
    // member once the leader has looked at every member, and see it in `member list`.
    let json = |output: Output| -> serde_json::Value {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let leader = status["leader_id"].as_u64().unwrap();
    let listed = wait_for("the leader to look at every member", || async {
        let listed = json(deployment.strand(&config, &["member", "list", "--json"]));
        let members = listed["members"].as_array().unwrap();
        members.iter().all(|member| member["reachable"] == true && member["role"] == "voter").then_some(listed)
    })
    .await;
    assert_eq!(listed["members"].as_array().unwrap().len(), 3, "{listed}");
    let target = (1..=3u64).find(|id| *id != leader).unwrap();
    let moved = json(deployment.strand(&config, &["cluster", "move-leader", &target.to_string(), "--json"]));
    assert_eq!((moved["previous_leader_id"].as_u64(), moved["leader_id"].as_u64()), (Some(leader), Some(target)));
    let backup = deployment.dir.path().join("compose.backup");
    let saved = json(deployment.strand(&config, &["snapshot", "save", backup.to_str().unwrap(), "--json"]));
    assert!(
        saved["counts"]["beads"].as_u64().unwrap() >= 1 && saved["counts"]["tokens"].as_u64().unwrap() >= 1,
        "{saved}"
    );
    let status = json(deployment.strand(&config, &["snapshot", "status", backup.to_str().unwrap(), "--json"]));
    assert_eq!(status["header"], saved["header"]);

    // Grow and shrink: a fourth container joins with --join over mutual TLS with the admin token
    // and is promoted; then it is removed.
    let joined = deployment.run(&["join"]);
    assert!(joined.status.success(), "cluster.sh join: {}", String::from_utf8_lossy(&joined.stderr));
    let listed = json(deployment.strand(&config, &["member", "list", "--json"]));
    let roles: Vec<_> = listed["members"].as_array().unwrap().iter().map(|member| member["role"].clone()).collect();
    assert_eq!(roles, vec!["voter"; 4], "{listed}");
    let removed = json(deployment.strand(&config, &["member", "remove", "4", "--json"]));
    assert_eq!(removed["members"].as_array().unwrap().len(), 3, "{removed}");

    // Restore: the backup becomes a new cluster in fresh volumes, serving what it held (the
    // tokens included: the admin token still works) under a new cluster id.
    let old_id = status["header"]["cluster_id"].clone();
    let restored = deployment.run(&["restore", backup.to_str().unwrap()]);
    assert!(restored.status.success(), "cluster.sh restore: {}", String::from_utf8_lossy(&restored.stderr));
    let listed = json(deployment.strand(&config, &["list", "--json"]));
    let titles: Vec<_> = listed.as_array().unwrap().iter().map(|bead| bead["title"].clone()).collect();
    assert_eq!(titles, vec!["in a container"], "{listed}");
    let again = deployment.dir.path().join("restored.backup");
    let saved = json(deployment.strand(&config, &["snapshot", "save", again.to_str().unwrap(), "--json"]));
    assert_ne!(saved["header"]["cluster_id"], old_id, "{saved}");
    let after_restore = json(deployment.strand(&config, &["create", "after the restore", "--json"]));
    // Node 1, the survivor to be, holds every write before the loss (a write acknowledged by
    // nodes 2 and 3 alone would go with them: the recipe starts the most complete member).
    wait_for("node 1 to apply every write", || async {
        let status = json(deployment.strand(&config, &["cluster", "status", "--json"]));
        let applied: Vec<u64> = status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| node["applied_index"].as_u64().unwrap_or(0))
            .collect();
        (applied.len() == 3 && applied.windows(2).all(|pair| pair[0] == pair[1])).then_some(())
    })
    .await;

    // A lost quorum: nodes 2 and 3 and their data are gone; node 1 starts once with
    // --force-new-cluster and keeps its whole log; a fresh fourth node joins it.
    let recovered = deployment.run(&["recover"]);
    assert!(recovered.status.success(), "cluster.sh recover: {}", String::from_utf8_lossy(&recovered.stderr));
    let shown = json(deployment.strand(&config, &["show", after_restore["id"].as_str().unwrap(), "--json"]));
    assert_eq!(shown[0]["title"], "after the restore", "{shown}");
    let joined = deployment.run(&["join"]);
    assert!(joined.status.success(), "cluster.sh join after recover: {}", String::from_utf8_lossy(&joined.stderr));
    let listed = json(deployment.strand(&config, &["member", "list", "--json"]));
    let members: Vec<_> = listed["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| (member["id"].clone(), member["role"].clone()))
        .collect();
    assert_eq!(members, vec![(1.into(), "voter".into()), (4.into(), "voter".into())], "{listed}");

    // Without the token, TLS still works and the request is refused; without the CA, TLS fails.
    let text = std::fs::read_to_string(&config).unwrap();
    let tokenless = deployment.dir.path().join("tokenless.toml");
    std::fs::write(&tokenless, text.lines().filter(|line| !line.starts_with("token")).collect::<Vec<_>>().join("\n"))
        .unwrap();
    let refused = deployment.strand(&tokenless, &["list"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("requires a token"), "{refused:?}");
    let plain = deployment.dir.path().join("plain.toml");
    std::fs::write(&plain, text.lines().filter(|line| line.starts_with("endpoints")).collect::<Vec<_>>().join("\n"))
        .unwrap();
    let refused = deployment.strand(&plain, &["list"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--cacert"), "{refused:?}");
}

/// A Prometheus process, killed on drop.
struct Prometheus(std::process::Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `curl -s URL` (with `query` URL-encoded, when given), as JSON.
fn prometheus_api(port: u16, path: &str, query: Option<&str>) -> Option<serde_json::Value> {
    let mut command = Command::new("curl");
    command.args(["-s", "--fail", "--get", &format!("http://127.0.0.1:{port}{path}")]);
    if let Some(query) = query {
        command.arg("--data-urlencode").arg(format!("query={query}"));
    }
    let output = command.output().expect("curl runs");
    serde_json::from_slice(&output.stdout).ok()
}

/// `deploy/prometheus.yml`, pointed at this test's ports and directory and scraping every
/// second, scrapes every node over TLS with the admin token; then every query of
/// `deploy/grafana/strand.json` answers data.
async fn prometheus_scrapes_the_cluster_and_answers_every_dashboard_query(deployment: &Deployment) {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut config = std::fs::read_to_string(deploy.join("prometheus.yml"))
        .unwrap()
        .replace("scrape_interval: 10s", "scrape_interval: 1s");
    for (index, port) in deployment.ports.iter().take(3).enumerate() {
        config = config.replace(&format!("127.0.0.1:{}", 7400 + index), &format!("127.0.0.1:{port}"));
    }
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(deployment.dir.path(), home.path().join("cluster")).unwrap();
    std::fs::write(home.path().join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let _prometheus = Prometheus(
        Command::new("prometheus")
            .current_dir(home.path())
            .args(["--config.file=prometheus.yml", "--storage.tsdb.path=data"])
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus runs (make deps installs it)"),
    );
    wait_for("Prometheus to scrape every node", || async {
        let targets = prometheus_api(port, "/api/v1/targets", None)?;
        let active = targets["data"]["activeTargets"].as_array()?.clone();
        (active.len() == 3 && active.iter().all(|target| target["health"] == "up")).then_some(())
    })
    .await;
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy.join("grafana/strand.json")).unwrap()).unwrap();
    let queries: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(queries.len() >= 20, "{queries:?}");
    for query in &queries {
        wait_for(&format!("Prometheus to answer {query} with data"), || async {
            let answer = prometheus_api(port, "/api/v1/query", Some(query))?;
            (!answer["data"]["result"].as_array()?.is_empty()).then_some(())
        })
        .await;
    }
}
