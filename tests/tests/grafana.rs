//! `deploy/grafana/strand.json`, the Grafana dashboard, against the metrics a running 3-node
//! cluster exports: every metric a query names is one the leader's `/metrics` page declares (a
//! counter as `_total`, a histogram as `_bucket`, `_sum` and `_count`), and every label a query
//! groups by is one of that metric's labels (or `instance`, `job` and `le`, which Prometheus and
//! histograms add). A renamed metric or label fails it. `deploy/prometheus.yml` scrapes the
//! files `deploy/cluster.sh` writes.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use api::command::{Command, CreateBead};
use tests::{Cluster, http_get, wait_for};

fn deploy(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)).unwrap()
}

/// Every sample name of a metrics page, with the labels its samples carry.
fn exported(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in page.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut words = declared.split_whitespace();
            let (name, kind) = (words.next().unwrap(), words.next().unwrap());
            let samples: Vec<String> = match kind {
                "counter" => vec![format!("{name}_total")],
                "histogram" => ["_bucket", "_sum", "_count"].iter().map(|suffix| format!("{name}{suffix}")).collect(),
                _ => vec![name.to_string()],
            };
            for sample in samples {
                names.entry(sample).or_default();
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap();
            let labels = names.entry(name.to_string()).or_default();
            if let Some(inside) =
                line.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map(|(inside, _)| inside)
            {
                labels.extend(inside.split(',').filter_map(|pair| Some(pair.split_once('=')?.0.to_string())));
            }
        }
    }
    names
}

/// The `strand_` metric names an expression reads.
fn metrics_of(expr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("strand_") {
        let tail = &rest[start..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        found.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    found
}

/// The labels an expression groups by (`by (a, b)`).
fn grouped_by(expr: &str) -> Vec<String> {
    expr.split("by (")
        .skip(1)
        .flat_map(|part| part.split(')').next().unwrap().split(',').map(|label| label.trim().to_string()))
        .collect()
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_reads_only_metrics_and_labels_a_node_exports() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    cluster
        .client()
        .execute(Command::Create(CreateBead { title: "scraped".into(), ..Default::default() }))
        .await
        .unwrap();
    let address = cluster.nodes[leader as usize - 1].address.clone();
    // The leader reports its members' lag once it has replicated to them, and its controller's
    // duties once they ran.
    let page = wait_for("the leader to report both members and its controller's duties", || async {
        let (_, _, page) = http_get(&address, "/metrics").await;
        (page.matches("strand_member_reachable{").count() == 2 && page.contains("strand_controller_duty_runs_total{"))
            .then_some(page)
    })
    .await;
    let exported = exported(&page);
    assert!(
        exported.contains_key("strand_requests_total") && exported.contains_key("strand_write_duration_seconds_bucket")
    );

    let dashboard: serde_json::Value = serde_json::from_str(&deploy("grafana/strand.json")).unwrap();
    assert_eq!(dashboard["uid"], "strand-cluster");
    let mut ids = BTreeSet::new();
    let mut read = BTreeSet::new();
    for panel in panels(&dashboard) {
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "panel ids are unique: {panel}");
        assert!(panel["gridPos"]["w"].as_u64().unwrap() > 0, "{panel}");
        for target in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{target}");
            let expr = target["expr"].as_str().unwrap();
            let metrics = metrics_of(expr);
            assert!(!metrics.is_empty(), "{expr} reads no Strand metric");
            for metric in &metrics {
                let labels = exported.get(metric).unwrap_or_else(|| {
                    panic!("panel {:?} reads {metric}, which a node does not export: {expr}", panel["title"])
                });
                for label in grouped_by(expr) {
                    assert!(
                        labels.contains(&label) || ["instance", "job", "le"].contains(&label.as_str()),
                        "panel {:?} groups {metric} by {label}, which it does not carry ({labels:?}): {expr}",
                        panel["title"]
                    );
                }
                read.insert(metric.clone());
            }
        }
    }
    // What the dashboard must cover: Raft and member lag, requests and latency, leases, the
    // controller's duties, connections per listener.
    for covered in [
        "strand_raft_term",
        "strand_member_lag_entries",
        "strand_requests_total",
        "strand_write_duration_seconds_bucket",
        "strand_leases",
        "strand_controller_duty_runs_total",
        "strand_connections_open",
    ] {
        assert!(read.contains(covered), "the dashboard does not show {covered}");
    }

    // Prometheus reads the compose cluster with the files cluster.sh writes, on its ports.
    let prometheus = deploy("prometheus.yml");
    for line in [
        "ca_file: cluster/certs/ca.pem",
        "credentials_file: cluster/admin.token",
        "scheme: https",
        r#"targets: ["127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"]"#,
    ] {
        assert!(prometheus.contains(line), "prometheus.yml lacks {line:?}");
    }
    let script = deploy("cluster.sh");
    assert!(
        script.contains(r#"--dir "$dir/certs""#) && script.contains(r#""$dir/admin.token""#),
        "cluster.sh's paths moved"
    );
}
