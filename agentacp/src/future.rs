//! A boxed future, the return type of the runtime's object-safe async traits (the server's
//! `Operator`, the client's `ClientHandlers`) and of the code `#[acp_operator]` generates.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
