//! Named limits on everything a request can carry or ask for (STYLE rule 1: bound everything).
//!
//! The node checks a request against these before it proposes it, and the state machine checks
//! them again when it applies the command, so an oversized value never reaches the log and a
//! log written by another build still applies deterministically.

/// Longest bead title, in bytes.
pub const TITLE_BYTES_MAX: usize = 1024;
/// Longest bead description, in bytes.
pub const DESCRIPTION_BYTES_MAX: usize = 64 * 1024;
/// Longest metadata key, in bytes.
pub const METADATA_KEY_BYTES_MAX: usize = 256;
/// Longest metadata value, in bytes.
pub const METADATA_VALUE_BYTES_MAX: usize = 64 * 1024;
/// Most metadata keys one bead may hold.
pub const METADATA_KEYS_MAX: usize = 256;
/// Longest label, in bytes.
pub const LABEL_BYTES_MAX: usize = 256;
/// Most labels one bead may hold.
pub const LABELS_MAX: usize = 64;
/// Longest actor, assignee, sender, type, reference, reason or other short string, in bytes.
pub const NAME_BYTES_MAX: usize = 256;
/// Longest close reason, in bytes.
pub const REASON_BYTES_MAX: usize = 4 * 1024;
/// Most ids one `close` or `get` may name.
pub const IDS_PER_REQUEST_MAX: usize = 1000;
/// Most dependencies one bead may have (outgoing edges).
pub const DEPENDENCIES_PER_BEAD_MAX: usize = 1000;
/// Longest namespace name, in bytes.
pub const NAMESPACE_BYTES_MAX: usize = 128;
/// Longest id prefix, in bytes.
pub const PREFIX_BYTES_MAX: usize = 32;
/// Largest encoded request the gRPC server accepts, in bytes.
pub const REQUEST_BYTES_MAX: usize = 1024 * 1024;
/// Most memory decoding one request may take, as estimated from its bytes before it is decoded
/// (`crate::decode_budget`); a request over it is refused with RESOURCE_EXHAUSTED.
pub const DECODED_REQUEST_BYTES_MAX: usize = 16 * REQUEST_BYTES_MAX;
/// Most memory, as a multiple of [`REQUEST_BYTES_MAX`], that one request of at most that size
/// makes a node allocate while it is decoded, checked and applied; measured by
/// `tests/tests/request_memory.rs` on the requests that grow most when decoded.
pub const REQUEST_MEMORY_MULTIPLE_MAX: usize = 64;
/// Largest encoded response the gRPC server sends, in bytes.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Default number of beads `ready` returns.
pub const READY_LIMIT_DEFAULT: u32 = 100;
/// Most beads any one list answer may hold; `limit 0` ("unlimited") is refused past this.
pub const LIST_RESULTS_MAX: usize = 50_000;
/// How many recent responses one client session keeps for retries.
pub const SESSION_RESPONSES_MAX: usize = 1024;
/// How many client sessions the dedup table keeps (least recently active evicted first), unless
/// more were active within [`SESSION_RETRY_WINDOW_MS`].
pub const SESSIONS_MAX: usize = 16_384;
/// How many sessions the table holds at most, even when all were active within the retry window.
pub const SESSIONS_HARD_MAX: usize = 16 * SESSIONS_MAX;
/// A session idle for this long (in leader time) is evicted.
pub const SESSION_IDLE_MS_MAX: i64 = 60 * 60 * 1000;
/// A session active this recently (in leader time) is never evicted by the [`SESSIONS_MAX`] cap,
/// so a retry inside this window is always answered from the table, a client's first request
/// included. Four times the client's default deadline (15 s).
pub const SESSION_RETRY_WINDOW_MS: i64 = 60 * 1000;

/// Most writes one transaction may hold (as many as a formula's steps, so a cooked graph fits).
pub const TXN_WRITES_MAX: usize = 1000;
/// Most conditions one transaction may check.
pub const TXN_CONDITIONS_MAX: usize = 1000;
/// Beads one import command adds (a larger file is sent in several).
pub const IMPORT_BEADS_MAX: usize = 1000;

/// Largest formula source, in bytes.
pub const FORMULA_BYTES_MAX: usize = 256 * 1024;
/// Most steps one formula may have (all of them are created in one command).
pub const FORMULA_STEPS_MAX: usize = 1000;
/// Most formulas stored in one namespace.
pub const FORMULAS_PER_NAMESPACE_MAX: usize = 10_000;
/// Most lease expiries one controller command carries.
pub const EXPIRIES_PER_COMMAND_MAX: usize = 1000;
/// Largest order source, in bytes.
pub const ORDER_BYTES_MAX: usize = 64 * 1024;
/// Most orders stored in one namespace.
pub const ORDERS_PER_NAMESPACE_MAX: usize = 1000;
/// Shortest cooldown or condition interval of an order, in milliseconds.
pub const ORDER_INTERVAL_MS_MIN: u64 = 1000;
/// Most variables one cook may pass.
pub const FORMULA_VARS_MAX: usize = 256;
/// Events a namespace keeps by default before the oldest are compacted (node config
/// `event_retention` overrides it; the leader stamps its value into every proposal).
pub const EVENT_RETENTION_DEFAULT: u64 = 100_000;
/// Fewest events a namespace may be configured to keep.
pub const EVENT_RETENTION_MIN: u64 = 100;
/// Most events one `events` answer or one watch batch holds.
pub const EVENTS_PER_QUERY_MAX: u32 = 10_000;
/// Default number of events `events` returns.
pub const EVENTS_LIMIT_DEFAULT: u32 = 1000;
/// Most beads one `purge` removes; run it again for the rest.
pub const PURGE_BEADS_MAX: usize = 10_000;
/// Most children one convoy create/add or one sling routes in a single command.
pub const ROUTED_BEADS_MAX: usize = 10_000;
/// Longest message subject kept as a title, in characters (docs/beads.md §7).
pub const MAIL_SUBJECT_CHARS_MAX: usize = 80;

const _: () = assert!(TITLE_BYTES_MAX < REQUEST_BYTES_MAX);
const _: () = assert!(FORMULA_BYTES_MAX < REQUEST_BYTES_MAX);
const _: () = assert!(EVENT_RETENTION_MIN <= EVENT_RETENTION_DEFAULT);
const _: () = assert!(EVENTS_LIMIT_DEFAULT <= EVENTS_PER_QUERY_MAX);
const _: () = assert!(ROUTED_BEADS_MAX <= LIST_RESULTS_MAX);
const _: () = assert!(DESCRIPTION_BYTES_MAX < REQUEST_BYTES_MAX);
const _: () = assert!(METADATA_VALUE_BYTES_MAX < REQUEST_BYTES_MAX);
const _: () = assert!(REQUEST_BYTES_MAX < RESPONSE_BYTES_MAX);
const _: () = assert!(READY_LIMIT_DEFAULT as usize <= LIST_RESULTS_MAX);

/// The shortest lease a claim may take, in milliseconds: shorter ones would expire between an
/// agent's renewals.
pub const LEASE_MS_MIN: u64 = 1000;
/// The longest lease a claim may take, in milliseconds (7 days).
pub const LEASE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// How many times a bead's leases may expire before the bead is dead-lettered, unless its
/// namespace says otherwise (`strand namespace configure --max-deliveries`).
pub const MAX_DELIVERIES_DEFAULT: u32 = 5;
/// The most deliveries a namespace may allow.
pub const MAX_DELIVERIES_MAX: u32 = 1000;
/// The lease fences one transaction may carry.
pub const TXN_FENCES_MAX: usize = 1000;

const _: () = assert!(LEASE_MS_MIN < LEASE_MS_MAX);
const _: () = assert!(MAX_DELIVERIES_DEFAULT <= MAX_DELIVERIES_MAX);
const _: () = assert!(ORDER_BYTES_MAX < REQUEST_BYTES_MAX);
// A cooked formula's steps are written as one transaction (see TXN_WRITES_MAX).
const _: () = assert!(TXN_WRITES_MAX >= FORMULA_STEPS_MAX);
