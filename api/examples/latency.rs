//! Breaks a running cluster's request latency down by path: a serializable read (gRPC only), a
//! linearizable read (plus the leader's read index), and a write (plus Raft). A measurement for
//! tuning, not a test:
//!
//! ```sh
//! cargo run -p api --example latency -- 127.0.0.1:7400
//! ```

use std::time::Instant;

use api::client::{Client, ClientConfig};
use api::command::{Command, CreateBead, Query};
use api::commands::get::Get;
use api::convert::Consistency;
use api::model::BeadId;
use api::outcome::Outcome;

const SAMPLES: usize = 500;

async fn median_millis<F, Fut>(mut call: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        call().await;
        samples.push(started.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    samples[SAMPLES / 2]
}

#[tokio::main]
async fn main() {
    let endpoint = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:7400".into());
    let client = |consistency| {
        let mut config = ClientConfig::new(vec![endpoint.clone()]);
        config.consistency = consistency;
        Client::new(config).expect("client")
    };
    let (serializable, linearizable) = (client(Consistency::Serializable), client(Consistency::Linearizable));
    let create = || Command::Create(CreateBead { title: "latency".into(), ..Default::default() });
    let Ok(Outcome::Bead(bead)) = linearizable.execute(create()).await else { panic!("create failed") };
    let get = || Query::from(Get { ids: vec![BeadId(bead.id.0.clone())] });
    let read_serializable = median_millis(|| async {
        serializable.query(get()).await.expect("read");
    })
    .await;
    let read_linearizable = median_millis(|| async {
        linearizable.query(get()).await.expect("read");
    })
    .await;
    let write = median_millis(|| async {
        linearizable.execute(create()).await.expect("write");
    })
    .await;
    println!(
        "median of {SAMPLES}: serializable read {read_serializable:.2} ms, linearizable read {read_linearizable:.2} ms, write {write:.2} ms"
    );
}
