//! The node's network seams over turmoil: streams of accepted simulated TCP connections for
//! `node::run`'s client and peer listeners, and a [`node::peer::network::Connector`] that dials simulated hosts.
//!
//! turmoil's TCP does not retransmit, so a partition can swallow a request or a reply on an open
//! connection: every RPC of the node and of the agents carries a timeout, and channels send
//! HTTP/2 keep-alive pings so a connection that went dead is dropped and redialled.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::transport::{Channel, Endpoint, Uri};
use turmoil::net::{TcpListener, TcpStream};

/// The port every simulated node serves clients on.
pub const NODE_PORT: u16 = 7400;
/// The port every simulated node serves its peers (Raft) on.
pub const PEER_PORT: u16 = 7500;
/// How long dialling a simulated host may take.
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// Interval of HTTP/2 keep-alive pings, and how long a ping may go unanswered.
pub const KEEP_ALIVE_MS: u64 = 1_000;

/// An accepted simulated connection, as tonic's server wants it.
pub struct Accepted(TcpStream);

impl Connected for Accepted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        TcpConnectInfo { local_addr: self.0.local_addr().ok(), remote_addr: self.0.peer_addr().ok() }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Binds `port` on the current simulated host and streams its accepted connections.
pub async fn incoming(port: u16) -> io::Result<impl Stream<Item = io::Result<Accepted>> + Send + 'static> {
    let listener = TcpListener::bind((IpAddr::from(Ipv4Addr::UNSPECIFIED), port)).await?;
    Ok(futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| Accepted(stream));
        Some((accepted, listener))
    }))
}

/// A lazily connecting channel to `address` (`host:port`) over the simulated network.
pub fn channel(address: &str) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|error| format!("simulated address {address:?} is not host:port: {error}"))?
        .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
        .http2_keep_alive_interval(Duration::from_millis(KEEP_ALIVE_MS))
        .keep_alive_timeout(Duration::from_millis(KEEP_ALIVE_MS))
        .keep_alive_while_idle(true);
    let connector = tower::service_fn(|uri: Uri| async move {
        let authority = uri
            .authority()
            .map(ToString::to_string)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri} has no host:port")))?;
        let stream = TcpStream::connect(authority).await?;
        Ok::<_, io::Error>(TokioIo::new(stream))
    });
    Ok(endpoint.connect_with_connector_lazy(connector))
}

/// The node's outbound connector over the simulated network.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurmoilConnector;

impl node::peer::network::Connector for TurmoilConnector {
    fn channel(&self, _member: u64, address: &str) -> Result<Channel, String> {
        channel(address)
    }
}
