//! Sending an rmcp transport's messages in the order they were given.
//!
//! rmcp's service loop hands each outgoing message to [`Transport::send`] in order, then
//! runs the futures it gets as tasks of their own. A byte-stream transport's future only
//! takes the writer's lock when first polled, so two messages can reach the wire in the
//! other order — a `notifications/cancelled` before the request it cancels, which the peer
//! then ignores and runs the request. [`InOrder`] lets each send through only once the ones
//! given before it are written.

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::watch;

/// A transport whose messages reach the wire in the order they were given to `send`.
pub(crate) struct InOrder<T> {
    inner: T,
    /// The ticket the next message gets.
    next: u64,
    /// The ticket whose message may be written now.
    turn: watch::Sender<u64>,
}

impl<T> InOrder<T> {
    /// `inner`, its sends kept in order.
    pub(crate) fn new(inner: T) -> Self {
        InOrder {
            inner,
            next: 0,
            turn: watch::Sender::new(0),
        }
    }
}

/// Passes the turn on when the message holding it is written, failed, or dropped.
struct Turn(watch::Sender<u64>);

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.send_modify(|turn| *turn += 1);
    }
}

impl<R: ServiceRole, T: Transport<R>> Transport<R> for InOrder<T> {
    type Error = T::Error;

    fn send(&mut self, item: TxJsonRpcMessage<R>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let ticket = self.next;
        self.next += 1;
        let sending = self.inner.send(item);
        let turn = self.turn.clone();
        async move {
            let mut waiting = turn.subscribe();
            // The sender lives in `self.turn` and here: it is never closed while we wait. A
            // send dropped before its turn leaves the later ones waiting, which only happens
            // as the service shuts down and drops them all.
            let _ = waiting.wait_for(|current| *current == ticket).await;
            let _pass_on = Turn(turn);
            sending.await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<R>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rmcp::service::RoleClient;
    use serde_json::{Value, json};

    use super::*;

    /// A transport that writes a message when its send future is first polled, recording it:
    /// as a stream transport takes its writer's lock.
    struct Recording {
        written: Arc<Mutex<Vec<Value>>>,
    }

    impl Transport<RoleClient> for Recording {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let written = self.written.clone();
            async move {
                written.lock().unwrap().push(serde_json::to_value(&item).unwrap());
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            None
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn message(value: Value) -> TxJsonRpcMessage<RoleClient> {
        serde_json::from_value(value).unwrap()
    }

    /// The request goes out before the cancellation given after it, although the task that
    /// sends the cancellation runs first (on this current-thread runtime, tasks run in the
    /// order they were spawned), as rmcp's send tasks may.
    #[tokio::test]
    async fn messages_reach_the_wire_in_the_order_they_were_given() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let mut transport = InOrder::new(Recording {
            written: written.clone(),
        });
        let request = transport.send(message(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})));
        let cancel = transport.send(message(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        ));
        let cancel = tokio::spawn(cancel);
        let request = tokio::spawn(request);
        cancel.await.unwrap().unwrap();
        request.await.unwrap().unwrap();
        let methods: Vec<Value> = written.lock().unwrap().iter().map(|m| m["method"].clone()).collect();
        assert_eq!(methods, [json!("ping"), json!("notifications/cancelled")]);
    }
}
