//! Shutdown on Windows: the console's control events stand for SIGINT and SIGTERM. Ctrl-C and
//! Ctrl-Break (what `GenerateConsoleCtrlEvent` sends a process group, and what a parent that
//! started the runtime with `CREATE_NEW_PROCESS_GROUP` uses to ask it to stop) are the
//! interrupt; the console closing and the system shutting down are the terminate, after which
//! Windows ends the process within seconds whatever it does.

use std::task::{Context, Poll};

use tokio::signal::windows::{
    CtrlBreak, CtrlC, CtrlClose, CtrlShutdown, ctrl_break, ctrl_c, ctrl_close, ctrl_shutdown,
};

/// What a console control event asks: to be interrupted (Ctrl-C, Ctrl-Break), or to end
/// (the console closing, the system shutting down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// Ctrl-C or Ctrl-Break.
    Interrupt,
    /// The console closing or the system shutting down.
    Terminate,
}

impl Event {
    /// What the event was, in Windows' words.
    pub(super) fn name(self) -> &'static str {
        match self {
            Event::Interrupt => "Ctrl-C or Ctrl-Break",
            Event::Terminate => "the console closing or the system shutting down",
        }
    }
}

/// The four console control events, caught.
#[derive(Debug)]
pub(super) struct ConsoleEvents {
    c: CtrlC,
    brk: CtrlBreak,
    close: CtrlClose,
    shutdown: CtrlShutdown,
}

impl ConsoleEvents {
    /// Installs the handlers (tokio's console control handler; needs a tokio runtime).
    pub(super) fn install() -> std::io::Result<ConsoleEvents> {
        Ok(ConsoleEvents {
            c: ctrl_c()?,
            brk: ctrl_break()?,
            close: ctrl_close()?,
            shutdown: ctrl_shutdown()?,
        })
    }

    /// Polls for the next event.
    pub(super) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        // `None` (the driver is gone) never resolves: the process ends some other way.
        let ready = |poll: Poll<Option<()>>| matches!(poll, Poll::Ready(Some(())));
        if ready(self.c.poll_recv(cx)) || ready(self.brk.poll_recv(cx)) {
            return Poll::Ready(Event::Interrupt);
        }
        if ready(self.close.poll_recv(cx)) || ready(self.shutdown.poll_recv(cx)) {
            return Poll::Ready(Event::Terminate);
        }
        Poll::Pending
    }
}

/// Resolves on any of the console events; when they cannot be watched, on Ctrl-C alone.
pub(super) async fn shutdown_signal() {
    match ConsoleEvents::install() {
        Ok(mut events) => {
            let event = std::future::poll_fn(|cx| events.poll_recv(cx)).await;
            tracing::info!(signal = event.name(), "draining");
        }
        Err(error) => {
            tracing::warn!(%error, "cannot watch the console's control events; only Ctrl-C stops the listener");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
