//! The user's terminal, lent to a command in a container: raw mode (given
//! back on drop, so every exit path restores it), its size, and its keys,
//! read by a thread that stops when asked instead of holding on to the next
//! keystroke.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

const STDIN: RawFd = 0;
const STDOUT: RawFd = 1;

/// Whether stdin and stdout are both terminals.
pub fn attached() -> bool {
    // SAFETY: isatty only reads the descriptor's state.
    unsafe { libc::isatty(STDIN) == 1 && libc::isatty(STDOUT) == 1 }
}

/// The terminal's (rows, columns), when stdout is one.
pub fn size() -> Option<(u16, u16)> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`.
    let ok = unsafe { libc::ioctl(STDOUT, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Raw mode on stdin while it lives: keys (Ctrl-C among them) go to the
/// command as bytes, nothing is echoed twice.
pub struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    pub fn enter() -> Result<Self, String> {
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `saved`; tcsetattr reads `raw`.
        unsafe {
            if libc::tcgetattr(STDIN, &mut saved) != 0 {
                return Err(format!(
                    "cannot read the terminal's mode: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(STDIN, libc::TCSANOW, &raw) != 0 {
                return Err(format!(
                    "cannot put the terminal in raw mode: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the mode read in `enter`.
        unsafe {
            libc::tcsetattr(STDIN, libc::TCSANOW, &self.saved);
        }
    }
}

/// Keys from stdin, as they come; dropping it stops the reader within
/// 100 ms.
pub struct Keys {
    pub rx: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
}

impl Keys {
    pub fn start() -> Self {
        let (tx, rx) = mpsc::channel(64);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !flag.load(Ordering::SeqCst) {
                let mut fd = libc::pollfd {
                    fd: STDIN,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd; read into a buffer of its length.
                let ready = unsafe { libc::poll(&mut fd, 1, 100) };
                if ready <= 0 {
                    continue;
                }
                let n = unsafe { libc::read(STDIN, buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 || tx.blocking_send(buf[..n as usize].to_vec()).is_err() {
                    break;
                }
            }
        });
        Self { rx, stop }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
