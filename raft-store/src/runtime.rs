//! openraft's runtime: tokio under two wrappers. [`DeterministicRng`] takes every random draw
//! (election timeouts) from a seeded generator, so a node's elections replay from its seed;
//! [`PanicProbe`] lets the simulator see a panic inside an openraft task (a failed debug
//! assertion, say) as a finding instead of losing its whole run to it.
//!
//! A panic in a task openraft spawns is caught here, not by tokio, and its join handle answers
//! a panic error ([`AsyncRuntime::is_panic`] holds), as tokio's would: openraft then stops the
//! node's Raft core with `Fatal::Panicked`, as it always did. The difference shows only under
//! turmoil, which shuts a host's runtime down on any task panic tokio sees and so aborts the
//! whole simulation: caught here, the panic stops one node, and the simulator, which installs a
//! probe on its thread ([`observe_panics`]), is told of it and reports it as a finding.
//!
//! Invariant: a spawned task's output, and whether its handle reports a panic, are what tokio
//! would give.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use openraft_rt::deterministic_rng::DeterministicRng;
use openraft_rt::{AsyncRuntime, OptionalSend, Select2, Select3, Select4};
use openraft_rt_tokio::TokioRuntime;

/// openraft's runtime for Strand. Raft must run inside `Runtime::scope(seed, ...)`.
pub type Runtime = DeterministicRng<PanicProbe<TokioRuntime>>;

/// Receives the message of a panic caught in an openraft task.
pub type PanicObserver = Box<dyn Fn(String)>;

thread_local! {
    static OBSERVER: RefCell<Option<PanicObserver>> = const { RefCell::new(None) };
}

/// Installs (or, with `None`, removes) the probe of this thread: from now on a panic in an
/// openraft task polled on this thread is caught and handed to it.
pub fn observe_panics(observer: Option<PanicObserver>) {
    OBSERVER.with(|slot| *slot.borrow_mut() = observer);
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// A runtime whose spawned tasks' panics are caught and reported to this thread's probe, if
/// any; everything else is `RT`'s.
#[derive(Debug)]
pub struct PanicProbe<RT: AsyncRuntime>(RT);

/// Why a task of a [`PanicProbe`] runtime did not finish.
#[derive(Debug)]
pub enum JoinError<E> {
    /// The task panicked, with this message.
    Panicked(String),
    /// The runtime's own error (the task was cancelled).
    Runtime(E),
}

impl<E: std::fmt::Display> std::fmt::Display for JoinError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Panicked(text) => write!(f, "task panicked: {text}"),
            JoinError::Runtime(error) => error.fmt(f),
        }
    }
}

/// The join handle of a [`PanicProbe`] task: `RT`'s handle of the task's caught outcome.
pub struct JoinHandle<H>(H);

impl<H, T, E> Future for JoinHandle<H>
where
    H: Future<Output = Result<Result<T, String>, E>> + Unpin,
{
    type Output = Result<T, JoinError<E>>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(text)) => Err(JoinError::Panicked(text)),
            Err(error) => Err(JoinError::Runtime(error)),
        })
    }
}

impl<RT: AsyncRuntime> AsyncRuntime for PanicProbe<RT> {
    type JoinError = JoinError<RT::JoinError>;
    type JoinHandle<T: OptionalSend + 'static> = JoinHandle<RT::JoinHandle<Result<T, String>>>;
    type Sleep = RT::Sleep;
    type Instant = RT::Instant;
    type TimeoutError = RT::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = RT::Timeout<R, T>;
    type ThreadLocalRng = RT::ThreadLocalRng;
    type Mpsc = RT::Mpsc;
    type Watch = RT::Watch;
    type Oneshot = RT::Oneshot;
    type Mutex<T: OptionalSend + 'static> = RT::Mutex<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        JoinHandle(RT::spawn(async move {
            AssertUnwindSafe(future).catch_unwind().await.map_err(|payload| {
                let text = panic_text(payload.as_ref());
                OBSERVER.with(|slot| {
                    if let Some(observer) = &*slot.borrow() {
                        observer(text.clone());
                    }
                });
                text
            })
        }))
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        RT::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        RT::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        RT::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        RT::timeout_at(deadline, future)
    }

    fn select2<A, B>(a: A, b: B) -> impl Future<Output = Select2<A::Output, B::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
    {
        RT::select2(a, b)
    }

    fn select3<A, B, C>(
        a: A,
        b: B,
        c: C,
    ) -> impl Future<Output = Select3<A::Output, B::Output, C::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
    {
        RT::select3(a, b, c)
    }

    fn select4<A, B, C, D>(
        a: A,
        b: B,
        c: C,
        d: D,
    ) -> impl Future<Output = Select4<A::Output, B::Output, C::Output, D::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
        D: Future + OptionalSend,
    {
        RT::select4(a, b, c, d)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        match join_error {
            JoinError::Panicked(_) => true,
            JoinError::Runtime(error) => RT::is_panic(error),
        }
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        RT::thread_rng()
    }

    fn new(threads: usize) -> Self {
        PanicProbe(RT::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }

    fn spawn_blocking<F, T>(f: F) -> impl Future<Output = Result<T, io::Error>> + Send
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        RT::spawn_blocking(f)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn a_panicking_task_answers_a_panic_and_is_handed_to_the_probe() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        observe_panics(Some(Box::new(move |text| sink.lock().unwrap().push(text))));
        runtime.block_on(async {
            let handle = PanicProbe::<TokioRuntime>::spawn(async {
                if std::hint::black_box(true) {
                    panic!("an assertion failed");
                }
            });
            let error = handle.await.unwrap_err();
            assert!(PanicProbe::<TokioRuntime>::is_panic(&error), "{error}");
            let fine = PanicProbe::<TokioRuntime>::spawn(async { 7 });
            assert_eq!(fine.await.unwrap(), 7);
        });
        observe_panics(None);
        assert_eq!(*seen.lock().unwrap(), vec!["an assertion failed".to_string()]);
    }
}
