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
//! `sanddune-egress-forward --later PORT=SOCKET...` does not reach for the
//! sockets before it says `ready`: a warm container's forwarder is started
//! ahead, and its sockets are served from the claim on (ADR 0037).
//!
//! `sanddune-egress-forward PORT=SOCKET... -- PROGRAM ARGS...` instead
//! starts a forwarder of its own (a child, in a process group of its own so
//! that a terminal's Ctrl-C is the program's alone), waits for its `ready`,
//! then becomes PROGRAM. A bubblewrap jail has a network namespace per
//! command, so each command brings its own forwarder, which ends with the
//! jail.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::thread;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|a| a == "--") {
        let program = args.split_off(at + 1);
        args.pop();
        return forward_then_run(&args, &program);
    }
    let later = args.first().is_some_and(|a| a == "--later");
    if later {
        args.remove(0);
    }
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
        eprintln!("usage: sanddune-egress-forward [--later] PORT=SOCKET...");
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
    for (_, socket) in listeners.iter().filter(|_| !later) {
        if let Err(e) = UnixStream::connect(socket) {
            eprintln!("sanddune-egress-forward: cannot reach {socket}: {e}");
            return ExitCode::from(1);
        }
    }
    let accepting: Vec<_> = listeners
        .into_iter()
        .map(|(listener, socket)| thread::spawn(move || accept(listener, socket)))
        .collect();
    println!("ready");
    let _ = std::io::stdout().flush();
    for thread in accepting {
        let _ = thread.join();
    }
    ExitCode::SUCCESS
}

/// Start the forwarder for `routes` as a child, wait for its `ready`, then
/// become `program`: its pid, its exit code and its signals are the
/// program's own.
fn forward_then_run(routes: &[String], program: &[String]) -> ExitCode {
    let Some(name) = program.first() else {
        eprintln!("sanddune-egress-forward: nothing to run after `--`");
        return ExitCode::from(2);
    };
    let me = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    let server = Command::new(me)
        .args(routes)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn();
    let mut line = String::new();
    let ready = server.is_ok_and(|mut child| {
        child.stdout.take().is_some_and(|out| {
            BufReader::new(out).read_line(&mut line).is_ok() && line.trim() == "ready"
        })
    });
    if !ready {
        // The forwarder said why on stderr, which is ours.
        return ExitCode::from(1);
    }
    let e = Command::new(name).args(&program[1..]).exec();
    eprintln!("sanddune-egress-forward: cannot run `{name}`: {e}");
    ExitCode::from(127)
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
