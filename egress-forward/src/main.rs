//! `sanddune-egress-forward PORT=SOCKET...`: listen on 127.0.0.1:PORT and
//! splice every connection to the unix socket SOCKET.
//!
//! The host starts it inside a container sandbox whose only network is
//! loopback, so that programs there reach the host's egress proxy at
//! 127.0.0.1:3128 without the host entering the container's network
//! namespace (which needs root over it: ADR 0031). It decides nothing: the
//! policy is the host's, behind the socket. Killing it cuts the sandbox off.
//!
//! It prints `ready` once every port listens, then nothing: the host may
//! stop reading its output.
//!
//! `sanddune-egress-forward PORT=SOCKET... -- PROGRAM ARGS...` instead runs
//! PROGRAM once every port listens, prints nothing (the output is the
//! program's), and ends with it, passing on its exit code. A bubblewrap jail
//! has a network namespace per command, so each command brings its own.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::thread;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let program = match args.iter().position(|a| a == "--") {
        Some(at) => {
            let program = args.split_off(at + 1);
            args.pop();
            if program.is_empty() {
                eprintln!("sanddune-egress-forward: nothing to run after `--`");
                return ExitCode::from(2);
            }
            Some(program)
        }
        None => None,
    };
    let mut routes = Vec::new();
    for arg in args {
        match parse(&arg) {
            Some(route) => routes.push(route),
            None => {
                eprintln!("sanddune-egress-forward: expected PORT=SOCKET, got `{arg}`");
                return ExitCode::from(2);
            }
        }
    }
    if routes.is_empty() {
        eprintln!("usage: sanddune-egress-forward PORT=SOCKET...");
        return ExitCode::from(2);
    }
    let mut listeners = Vec::new();
    for (port, socket) in routes {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => listeners.push((listener, socket)),
            Err(e) => {
                eprintln!("sanddune-egress-forward: cannot listen on 127.0.0.1:{port}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    // A socket the forwarder cannot reach is the host's to hear about now,
    // not a program's to find out from a closed connection later.
    for (_, socket) in &listeners {
        if let Err(e) = UnixStream::connect(socket) {
            eprintln!("sanddune-egress-forward: cannot reach {socket}: {e}");
            return ExitCode::from(1);
        }
    }
    let accepting: Vec<_> = listeners
        .into_iter()
        .map(|(listener, socket)| thread::spawn(move || accept(listener, socket)))
        .collect();
    if let Some(program) = program {
        return run(&program);
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    for thread in accepting {
        let _ = thread.join();
    }
    ExitCode::SUCCESS
}

/// Run `argv` with this process's stdio and end with its code, or 128 plus
/// the signal that ended it, as a shell reports one.
fn run(argv: &[String]) -> ExitCode {
    match Command::new(&argv[0]).args(&argv[1..]).status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(code as u8),
            (None, Some(signal)) => ExitCode::from(128u8.wrapping_add(signal as u8)),
            (None, None) => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("sanddune-egress-forward: cannot run `{}`: {e}", argv[0]);
            ExitCode::from(127)
        }
    }
}

fn parse(arg: &str) -> Option<(u16, String)> {
    let (port, socket) = arg.split_once('=')?;
    let port = port.parse().ok().filter(|p| *p != 0)?;
    (!socket.is_empty()).then(|| (port, socket.to_string()))
}

fn accept(listener: TcpListener, socket: String) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let socket = socket.clone();
        thread::spawn(move || {
            // Unreachable host side: the client sees its connection closed.
            if let Ok(upstream) = UnixStream::connect(&socket) {
                splice(client, upstream);
            }
        });
    }
}

/// Copy both ways until both sides are done, passing on each half-close.
fn splice(client: TcpStream, upstream: UnixStream) {
    let (Ok(client_read), Ok(upstream_write)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let out = thread::spawn(move || {
        pump(client_read, &upstream_write);
        let _ = upstream_write.shutdown(Shutdown::Write);
    });
    pump(upstream, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = out.join();
}

fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
