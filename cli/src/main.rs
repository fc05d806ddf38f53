//! `strand`, the client build: every command, with `node`, `dev` and `snapshot` handed to the full
//! build `strand-node` beside it (see the library's header).

fn main() -> std::process::ExitCode {
    cli::main(None)
}
