//! Calls to a legacy upstream that wait for their caller's answers.
//!
//! A legacy server (2025-11-25 and earlier) asks its questions in the
//! middle of a call — `elicitation/create`, `sampling/createMessage`,
//! `roots/list` — and waits for the answer on the same call. The gateway's
//! caller answers in a new round (`input_required`, then a retry), so the
//! upstream call is parked between the two: it keeps running in its own
//! task, its question waits here under a random id that travels in the
//! gateway's sealed `requestState`, and the retry takes it back out.
//!
//! A parked call lives in the process that started it: a retry that
//! reaches another gateway process (or comes after the call's timeout)
//! finds nothing and is told to call again. Parked calls are bounded in
//! number per upstream and forgotten after the call's own timeout.
//!
//! Layer: `call`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use toolgate_client::{CallOptions, ClientError};
use toolgate_protocol::{RpcError, codes};
use toolgate_server::{Inputs, ToolError};

use toolgate_client::Round;

use crate::call::rounds::{Ended, Relayed};
use crate::call::upstream::Upstream;

/// At most this many calls of one upstream wait for answers at once.
pub const MAX_PARKED: usize = 256;

/// One question of the upstream, and where its answer goes.
pub struct Question {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The request's params, as the upstream sent them.
    pub params: Value,
    /// The answer (or the error) the upstream receives.
    pub reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// An upstream call running in its own task: its questions as they come,
/// and how it ended (an [`Ended`], whichever kind of call it is).
/// Dropping it ends the call (and so cancels it upstream).
pub struct Flight {
    /// The upstream's questions.
    questions: mpsc::Receiver<Question>,
    /// The call's outcome, once it ends.
    done: oneshot::Receiver<Ended>,
    /// How many questions the upstream asked so far (the next key).
    asked: u64,
    task: tokio::task::AbortHandle,
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Flight {
    /// Start `call` with `options` in its own task, its server requests
    /// going to the flight's questions.
    pub fn start<T, Fut>(mut options: CallOptions, call: impl FnOnce(CallOptions) -> Fut) -> Self
    where
        T: Relayed,
        Fut: Future<Output = Result<Round<T>, ClientError>> + Send + 'static,
    {
        let (asks, questions) = mpsc::channel::<Question>(4);
        options.questions = Some(Arc::new(move |method, params| {
            let asks = asks.clone();
            Box::pin(async move {
                let (reply, answer) = oneshot::channel();
                let asked = Question {
                    method,
                    params,
                    reply,
                };
                if asks.send(asked).await.is_err() {
                    return Err(RpcError::new(codes::INTERNAL_ERROR, "the call has ended"));
                }
                answer.await.unwrap_or_else(|_| {
                    Err(RpcError::new(
                        codes::INVALID_REQUEST,
                        "the gateway's caller did not answer",
                    ))
                })
            })
        }));
        let (finished, done) = oneshot::channel();
        let running = call(options);
        let task = tokio::spawn(async move {
            let _ = finished.send(T::ended(running.await));
        });
        Flight {
            questions,
            done,
            asked: 0,
            task: task.abort_handle(),
        }
    }
}

/// Where a relayed legacy call stands after a round.
pub enum Step {
    /// Parked under this id, waiting for the caller's answer.
    Parked(String),
    /// Ended so.
    Done(Ended),
}

/// Pass the caller's answer to the question `waiting` parked on, then fly
/// on. Asked again when the caller still did not answer.
pub async fn answer(
    upstream: &Upstream,
    input: &mut Inputs,
    waiting: Waiting,
) -> Result<Step, ToolError> {
    let Waiting {
        flight,
        question,
        key,
    } = waiting;
    let request = json!({"method": question.method, "params": question.params});
    match input.relay(&key, request)? {
        Some(answer) => {
            let _ = question.reply.send(Ok(answer));
            fly(upstream, input, flight).await
        }
        None => park(upstream, flight, question, key),
    }
}

/// Follow the call until it ends or asks what only the caller can answer.
pub async fn fly(
    upstream: &Upstream,
    input: &mut Inputs,
    mut flight: Flight,
) -> Result<Step, ToolError> {
    loop {
        let question = tokio::select! {
            biased;
            outcome = &mut flight.done => {
                return Ok(Step::Done(outcome.unwrap_or(Ended::Lost)));
            }
            question = flight.questions.recv() => question,
        };
        // The call's own handler is gone: only its end is left to wait for.
        let Some(question) = question else {
            let outcome = (&mut flight.done).await;
            return Ok(Step::Done(outcome.unwrap_or(Ended::Lost)));
        };
        flight.asked += 1;
        let key = format!("legacy-{}", flight.asked);
        let request = json!({"method": question.method, "params": question.params});
        match input.relay(&key, request) {
            Ok(Some(answer)) => {
                let _ = question.reply.send(Ok(answer));
            }
            Ok(None) => return park(upstream, flight, question, key),
            // The caller cannot answer this kind of question: the upstream
            // hears so, and decides what follows.
            Err(_) => {
                let _ = question.reply.send(Err(RpcError::new(
                    codes::INVALID_REQUEST,
                    format!(
                        "the client behind the gateway cannot answer {}: it did not declare the capability",
                        question.method
                    ),
                )));
            }
        }
    }
}

fn park(
    upstream: &Upstream,
    flight: Flight,
    question: Question,
    key: String,
) -> Result<Step, ToolError> {
    let waiting = Waiting {
        flight,
        question,
        key,
    };
    match upstream
        .parked
        .park(waiting, upstream.config.call_timeout())
    {
        Ok(id) => Ok(Step::Parked(id)),
        Err(waiting) => {
            let _ = waiting.question.reply.send(Err(RpcError::new(
                codes::INTERNAL_ERROR,
                "the gateway has too many calls waiting for answers",
            )));
            Err(ToolError::new(format!(
                "The upstream server {} asked a question, but {MAX_PARKED} of its calls are already waiting for answers. Try again later.",
                upstream.config.name
            )))
        }
    }
}

/// A call waiting for its caller's answer to `question`, asked under `key`.
pub struct Waiting {
    /// The call.
    pub flight: Flight,
    /// The question it waits on.
    pub question: Question,
    /// The key the caller was asked under.
    pub key: String,
}

/// The parked calls of one upstream.
#[derive(Default)]
pub struct Parked {
    calls: Mutex<HashMap<String, Waiting>>,
}

impl Parked {
    /// Park `waiting` for at most `ttl`; its id, or the call back when
    /// [`MAX_PARKED`] calls wait already.
    pub fn park(self: &Arc<Self>, waiting: Waiting, ttl: Duration) -> Result<String, Waiting> {
        let id = crate::base::ids::new_nonce();
        {
            let mut calls = self.calls.lock();
            if calls.len() >= MAX_PARKED {
                return Err(waiting);
            }
            calls.insert(id.clone(), waiting);
        }
        let parked = Arc::downgrade(self);
        let forget = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            // Dropping the call answers the upstream's question with
            // nothing and ends what is left of it.
            if let Some(parked) = parked.upgrade() {
                parked.take(&forget);
            }
        });
        Ok(id)
    }

    /// The call parked under `id`, if it is still waiting here.
    pub fn take(&self, id: &str) -> Option<Waiting> {
        self.calls.lock().remove(id)
    }

    /// How many calls wait now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.lock().len()
    }

    /// Whether no call waits.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> (Waiting, oneshot::Receiver<Result<Value, RpcError>>) {
        let (_q, questions) = mpsc::channel(1);
        let (_d, done) = oneshot::channel();
        let (reply, answer) = oneshot::channel();
        let w = Waiting {
            flight: Flight {
                questions,
                done,
                asked: 1,
                task: tokio::spawn(async {}).abort_handle(),
            },
            question: Question {
                method: "roots/list".into(),
                params: Value::Null,
                reply,
            },
            key: "legacy/1".into(),
        };
        (w, answer)
    }

    #[tokio::test]
    async fn a_parked_call_is_taken_once() {
        let parked = Arc::new(Parked::default());
        let (w, _answer) = waiting();
        let id = parked.park(w, Duration::from_secs(60)).ok().unwrap();
        assert_eq!(parked.len(), 1);
        assert!(parked.take(&id).is_some());
        assert!(parked.take(&id).is_none());
        assert!(parked.take("not-an-id").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_call_is_forgotten_after_its_time_and_its_question_ends() {
        let parked = Arc::new(Parked::default());
        let (w, answer) = waiting();
        parked.park(w, Duration::from_secs(60)).ok().unwrap();
        // The upstream's question ends unanswered once the call is dropped.
        assert!(answer.await.is_err());
        assert!(parked.is_empty());
    }

    #[tokio::test]
    async fn parking_is_bounded() {
        let parked = Arc::new(Parked::default());
        let mut keep = Vec::new();
        for _ in 0..MAX_PARKED {
            let (w, answer) = waiting();
            keep.push(answer);
            assert!(parked.park(w, Duration::from_secs(60)).is_ok());
        }
        let (w, _answer) = waiting();
        assert!(parked.park(w, Duration::from_secs(60)).is_err());
        assert_eq!(parked.len(), MAX_PARKED);
    }
}
