//! What the benchmarks share: their agents' clients, bulk creation of beads, latency histograms,
//! and the check of their flags' ranges.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use api::client::Client;
use api::command::{Command, CreateBead};
use api::model::{BeadId, Namespace};
use api::outcome::Outcome;
use hdrhistogram::Histogram;

use crate::{Cli, Failure};

/// Most concurrent agents.
pub const AGENTS_MAX: usize = 4096;

/// Concurrent writers that create the beads.
const CREATORS: usize = 64;

/// Latencies in microseconds, from 1 µs to 10 minutes, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds are valid")
}

/// A client of the benchmark's namespace, with the CLI's global flags.
pub fn agent_client(cli: &Cli, namespace: &Namespace) -> Result<Arc<Client>, Failure> {
    Ok(Arc::new(cli.client_in(&namespace.0)?))
}

/// Creates `count` beads labelled `label` through [`CREATORS`] concurrent writers.
pub async fn create_beads(client: &Arc<Client>, count: usize, label: &str) -> Result<Vec<BeadId>, Failure> {
    create_many(client, count, label, None).await
}

/// Creates `count` beads labelled `label` that each wait for `blocker`.
pub async fn create_waiting(
    client: &Arc<Client>,
    count: usize,
    label: &str,
    blocker: &BeadId,
) -> Result<Vec<BeadId>, Failure> {
    create_many(client, count, label, Some(blocker)).await
}

async fn create_many(
    client: &Arc<Client>,
    count: usize,
    label: &str,
    blocker: Option<&BeadId>,
) -> Result<Vec<BeadId>, Failure> {
    let needs: Vec<String> = blocker.iter().map(|bead_id| bead_id.0.clone()).collect();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CREATORS.min(count.max(1)) {
        let (client, next, label, needs) = (client.clone(), next.clone(), label.to_string(), needs.clone());
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let create = CreateBead {
                    title: "bench".into(),
                    labels: [label.clone()].into(),
                    needs: needs.clone(),
                    ..Default::default()
                };
                match client.execute(Command::Create(create)).await? {
                    Outcome::Bead(bead) => ids.push(bead.id),
                    other => return Err(api::client::ClientError::Failed(format!("create answered {other:?}"))),
                }
            }
            Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(count);
    for task in tasks {
        ids.extend(task.await.map_err(|error| Failure::Refused(error.to_string()))??);
    }
    Ok(ids)
}

/// `p50=…ms p99=…ms max=…ms` of a latency histogram in microseconds.
pub fn latency_summary(latency: &Histogram<u64>) -> String {
    let millis = |micros: u64| micros as f64 / 1000.0;
    format!(
        "p50={:.2}ms p99={:.2}ms max={:.2}ms",
        millis(latency.value_at_quantile(0.5)),
        millis(latency.value_at_quantile(0.99)),
        millis(latency.max())
    )
}

/// Refuses a flag value outside `min..=max` as a usage error.
pub fn check_range(flag: &str, value: usize, min: usize, max: usize) -> Result<(), Failure> {
    if value < min || value > max {
        return Err(Failure::Usage(format!("{flag} must be between {min} and {max}")));
    }
    Ok(())
}
