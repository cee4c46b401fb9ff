//! The services the host gives plugins: the policy, a judge model and a logger.
//!
//! Plugins see [`HostServices`], [`Policy`] and [`Judge`], plain Rust wrappers around FFI-safe
//! trait objects. The host (and tests) build a `HostServices` from plain Rust implementations
//! of [`PolicyService`], [`JudgeService`] and [`LogSink`] with [`HostServices::builder`]; every
//! call across the boundary is guarded so that a panic becomes an error, never an abort.

use crate::conversation::{Message, SamplingParams, TopKEntries};
use crate::guard::guard;
use abi_stable::sabi_trait;
use abi_stable::std_types::{RBox, ROption, RResult, RStr, RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The severity of a log line.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal progress.
    Info,
    /// Something is off but work goes on.
    Warn,
    /// Something failed.
    Error,
}

/// A generation the policy ran: the exact tokens and their log-probabilities.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The prompt token ids the engine consumed.
    pub prompt_ids: RVec<u32>,
    /// The sampled token ids.
    pub response_ids: RVec<u32>,
    /// The log-probability of each sampled token under the distribution it was sampled from.
    pub logprobs: RVec<f32>,
    /// The response as parsed into a message (content, reasoning, tool calls).
    pub message: Message,
    /// `stop`, `length` or `tool_calls`.
    pub finish_reason: RString,
    /// The weight version that produced the tokens.
    pub weight_version: u64,
}

/// A request to score given response tokens under a given prompt.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreTokens {
    /// The prompt token ids.
    pub prompt_ids: RVec<u32>,
    /// The response token ids to score.
    pub response_ids: RVec<u32>,
    /// Also return the top-k log-probabilities at each response position (0: none).
    pub top_k: u32,
}

/// Log-probabilities of response tokens.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenScores {
    /// The log-probability of response token `i`, taken at the position that predicts it.
    pub logprobs: RVec<f32>,
    /// The top-k at each response position, when asked for.
    pub topk: ROption<TopKEntries>,
}

/// A request to the judge model.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgeRequest {
    /// The chat to complete.
    pub messages: RVec<Message>,
    /// How to sample.
    pub sampling: SamplingParams,
    /// How many independent completions to return (votes).
    pub n: u32,
}

// ---------------------------------------------------------------------------------------------
// FFI-safe trait objects. Methods may be appended after the last one in a 1.x release.

/// The policy as it crosses the boundary. Plugins use [`Policy`] instead.
#[sabi_trait]
pub trait FfiPolicy: Send + Sync {
    /// See [`Policy::generate`].
    fn generate(
        &self,
        prompt_ids: RVec<u32>,
        params: SamplingParams,
    ) -> RResult<Generation, RString>;
    /// See [`Policy::chat`].
    fn chat(
        &self,
        messages: RVec<Message>,
        tools_json: RString,
        params: SamplingParams,
    ) -> RResult<Generation, RString>;
    /// See [`Policy::score`].
    fn score(&self, request: ScoreTokens) -> RResult<TokenScores, RString>;
    /// See [`Policy::render_chat`].
    fn render_chat(
        &self,
        messages: RVec<Message>,
        tools_json: RString,
        add_generation_prompt: bool,
    ) -> RResult<RString, RString>;
    /// See [`Policy::tokenize`].
    fn tokenize(&self, text: RString) -> RResult<RVec<u32>, RString>;
    /// See [`Policy::weight_version`].
    #[sabi(last_prefix_field)]
    fn weight_version(&self) -> u64;
}

/// The judge as it crosses the boundary. Plugins use [`Judge`] instead.
#[sabi_trait]
pub trait FfiJudge: Send + Sync {
    /// See [`Judge::complete`].
    fn complete(&self, request: JudgeRequest) -> RResult<RVec<RResult<RString, RString>>, RString>;
    /// See [`Judge::classify`].
    #[sabi(last_prefix_field)]
    fn classify(&self, text: RString) -> RResult<RVec<f32>, RString>;
}

/// The host as it crosses the boundary. Plugins use [`HostServices`] instead.
#[sabi_trait]
pub trait FfiHost: Send + Sync {
    /// Writes a log line under the plugin's name.
    fn log(&self, level: LogLevel, message: RStr<'_>);
    /// The policy being trained, when the host has one.
    fn policy(&self) -> ROption<FfiPolicyBox>;
    /// The teacher model, when the method has one.
    fn teacher(&self) -> ROption<FfiPolicyBox>;
    /// The judge model, when the host has one.
    #[sabi(last_prefix_field)]
    fn judge(&self) -> ROption<FfiJudgeBox>;
    /// The judge that answers the outcome (PRM) prompt, when the host names one apart from
    /// [`FfiHost::judge`] (appended in 1.3).
    fn prm_judge(&self) -> ROption<FfiJudgeBox>;
}

/// A boxed [`FfiPolicy`].
pub type FfiPolicyBox = FfiPolicy_TO<'static, RBox<()>>;
/// A boxed [`FfiJudge`].
pub type FfiJudgeBox = FfiJudge_TO<'static, RBox<()>>;
/// A boxed [`FfiHost`].
pub type FfiHostBox = FfiHost_TO<'static, RBox<()>>;

// ---------------------------------------------------------------------------------------------
// Plain Rust on the host's side.

/// The policy's services, implemented by the host in plain Rust.
pub trait PolicyService: Send + Sync + 'static {
    /// Samples a continuation of `prompt_ids`.
    fn generate(&self, prompt_ids: &[u32], params: &SamplingParams) -> Result<Generation, String>;
    /// Renders `messages` with the chat template and samples a reply.
    fn chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        params: &SamplingParams,
    ) -> Result<Generation, String>;
    /// Scores response tokens under a prompt.
    fn score(&self, request: &ScoreTokens) -> Result<TokenScores, String>;
    /// Renders messages with the chat template.
    fn render_chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        add_generation_prompt: bool,
    ) -> Result<String, String>;
    /// Tokenizes text without adding special tokens.
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, String>;
    /// The version of the weights in use now.
    fn weight_version(&self) -> u64;
}

/// The judge's services, implemented by the host in plain Rust.
pub trait JudgeService: Send + Sync + 'static {
    /// Returns `request.n` completions; each may fail on its own.
    fn complete(&self, request: &JudgeRequest) -> Result<Vec<Result<String, String>>, String>;
    /// Class probabilities of a sequence-classification reward model.
    fn classify(&self, text: &str) -> Result<Vec<f32>, String>;
}

/// Where plugin log lines go, implemented by the host in plain Rust.
pub trait LogSink: Send + Sync + 'static {
    /// Writes one line.
    fn log(&self, level: LogLevel, message: &str);
}

/// A log sink that writes to standard error; used when nothing else is given.
pub struct StderrLog;

impl LogSink for StderrLog {
    fn log(&self, level: LogLevel, message: &str) {
        eprintln!("[{level:?}] {message}");
    }
}

struct PolicyAdapter(Arc<dyn PolicyService>);

impl FfiPolicy for PolicyAdapter {
    fn generate(
        &self,
        prompt_ids: RVec<u32>,
        params: SamplingParams,
    ) -> RResult<Generation, RString> {
        guard("policy.generate", || self.0.generate(&prompt_ids, &params))
    }
    fn chat(
        &self,
        messages: RVec<Message>,
        tools_json: RString,
        params: SamplingParams,
    ) -> RResult<Generation, RString> {
        guard("policy.chat", || {
            self.0.chat(&messages, &tools_json, &params)
        })
    }
    fn score(&self, request: ScoreTokens) -> RResult<TokenScores, RString> {
        guard("policy.score", || self.0.score(&request))
    }
    fn render_chat(
        &self,
        messages: RVec<Message>,
        tools_json: RString,
        add_generation_prompt: bool,
    ) -> RResult<RString, RString> {
        guard("policy.render_chat", || {
            self.0
                .render_chat(&messages, &tools_json, add_generation_prompt)
                .map(RString::from)
        })
    }
    fn tokenize(&self, text: RString) -> RResult<RVec<u32>, RString> {
        guard("policy.tokenize", || self.0.tokenize(&text).map(RVec::from))
    }
    fn weight_version(&self) -> u64 {
        self.0.weight_version()
    }
}

struct JudgeAdapter(Arc<dyn JudgeService>);

impl FfiJudge for JudgeAdapter {
    fn complete(&self, request: JudgeRequest) -> RResult<RVec<RResult<RString, RString>>, RString> {
        guard("judge.complete", || {
            self.0.complete(&request).map(|outs| {
                outs.into_iter()
                    .map(|o| match o {
                        Ok(t) => RResult::ROk(RString::from(t)),
                        Err(e) => RResult::RErr(RString::from(e)),
                    })
                    .collect::<RVec<_>>()
            })
        })
    }
    fn classify(&self, text: RString) -> RResult<RVec<f32>, RString> {
        guard("judge.classify", || self.0.classify(&text).map(RVec::from))
    }
}

struct HostAdapter {
    log: Arc<dyn LogSink>,
    policy: Option<Arc<dyn PolicyService>>,
    teacher: Option<Arc<dyn PolicyService>>,
    judge: Option<Arc<dyn JudgeService>>,
    prm_judge: Option<Arc<dyn JudgeService>>,
}

fn judge_box(j: Arc<dyn JudgeService>) -> FfiJudgeBox {
    FfiJudge_TO::from_value(JudgeAdapter(j), sabi_trait::TD_Opaque)
}

impl FfiHost for HostAdapter {
    fn log(&self, level: LogLevel, message: RStr<'_>) {
        let log = self.log.clone();
        let text = message.as_str().to_owned();
        // A logger that panics must not abort the process: swallow it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| log.log(level, &text)));
    }
    fn policy(&self) -> ROption<FfiPolicyBox> {
        self.policy.clone().map(policy_box).into()
    }
    fn teacher(&self) -> ROption<FfiPolicyBox> {
        self.teacher.clone().map(policy_box).into()
    }
    fn judge(&self) -> ROption<FfiJudgeBox> {
        self.judge.clone().map(judge_box).into()
    }
    fn prm_judge(&self) -> ROption<FfiJudgeBox> {
        self.prm_judge.clone().map(judge_box).into()
    }
}

fn policy_box(p: Arc<dyn PolicyService>) -> FfiPolicyBox {
    FfiPolicy_TO::from_value(PolicyAdapter(p), sabi_trait::TD_Opaque)
}

fn unwrap_ffi<T>(r: RResult<T, RString>) -> Result<T, String> {
    r.into_result().map_err(String::from)
}

// ---------------------------------------------------------------------------------------------
// Plain Rust on the plugin's side.

/// The host's services, as a plugin sees them.
pub struct HostServices {
    inner: FfiHostBox,
}

/// Builds a [`HostServices`] from plain Rust services.
#[derive(Default)]
pub struct HostServicesBuilder {
    log: Option<Arc<dyn LogSink>>,
    policy: Option<Arc<dyn PolicyService>>,
    teacher: Option<Arc<dyn PolicyService>>,
    judge: Option<Arc<dyn JudgeService>>,
    prm_judge: Option<Arc<dyn JudgeService>>,
}

impl HostServicesBuilder {
    /// Where log lines go (standard error by default).
    pub fn log(mut self, log: Arc<dyn LogSink>) -> Self {
        self.log = Some(log);
        self
    }
    /// The policy.
    pub fn policy(mut self, policy: Arc<dyn PolicyService>) -> Self {
        self.policy = Some(policy);
        self
    }
    /// The teacher.
    pub fn teacher(mut self, teacher: Arc<dyn PolicyService>) -> Self {
        self.teacher = Some(teacher);
        self
    }
    /// The judge (hints, and every prompt when no PRM judge is given apart).
    pub fn judge(mut self, judge: Arc<dyn JudgeService>) -> Self {
        self.judge = Some(judge);
        self
    }
    /// The judge of the outcome (PRM) prompt, when it is another than [`Self::judge`].
    pub fn prm_judge(mut self, judge: Arc<dyn JudgeService>) -> Self {
        self.prm_judge = Some(judge);
        self
    }
    /// The services.
    pub fn build(self) -> HostServices {
        HostServices {
            inner: FfiHost_TO::from_value(
                HostAdapter {
                    log: self.log.unwrap_or_else(|| Arc::new(StderrLog)),
                    policy: self.policy,
                    teacher: self.teacher,
                    judge: self.judge,
                    prm_judge: self.prm_judge,
                },
                sabi_trait::TD_Opaque,
            ),
        }
    }
}

impl HostServices {
    /// A builder for the services a host gives.
    pub fn builder() -> HostServicesBuilder {
        HostServicesBuilder::default()
    }

    /// Services with a logger to standard error and nothing else: enough for a loss.
    pub fn standalone() -> HostServices {
        HostServices::builder().build()
    }

    /// Wraps the FFI object the host passed to a constructor.
    pub fn from_ffi(inner: FfiHostBox) -> HostServices {
        HostServices { inner }
    }

    /// Unwraps into the FFI object, to pass to a constructor.
    pub fn into_ffi(self) -> FfiHostBox {
        self.inner
    }

    /// Writes a log line.
    pub fn log(&self, level: LogLevel, message: &str) {
        self.inner.log(level, message.into());
    }

    /// Writes an info line.
    pub fn info(&self, message: &str) {
        self.log(LogLevel::Info, message);
    }

    /// Writes a warning.
    pub fn warn(&self, message: &str) {
        self.log(LogLevel::Warn, message);
    }

    /// The policy, when the host has one.
    pub fn policy(&self) -> Option<Policy> {
        self.inner
            .policy()
            .into_option()
            .map(|inner| Policy { inner })
    }

    /// The teacher, when the method has one.
    pub fn teacher(&self) -> Option<Policy> {
        self.inner
            .teacher()
            .into_option()
            .map(|inner| Policy { inner })
    }

    /// The judge, when the host has one: the hint judge of distillation, and any prompt that
    /// has no judge of its own.
    pub fn judge(&self) -> Option<Judge> {
        self.inner
            .judge()
            .into_option()
            .map(|inner| Judge { inner })
    }

    /// The judge of the outcome (PRM) prompt: `PRM_MODEL_PATH`'s model when the host has one
    /// apart, else [`Self::judge`].
    pub fn prm_judge(&self) -> Option<Judge> {
        self.inner
            .prm_judge()
            .into_option()
            .map(|inner| Judge { inner })
            .or_else(|| self.judge())
    }

    /// A logger that can be kept apart from the services.
    pub fn logger(&self) -> Logger<'_> {
        Logger { host: self }
    }
}

/// A borrowed logger.
pub struct Logger<'a> {
    host: &'a HostServices,
}

impl Logger<'_> {
    /// Writes a log line.
    pub fn log(&self, level: LogLevel, message: &str) {
        self.host.log(level, message);
    }
}

/// The policy, as a plugin sees it.
pub struct Policy {
    inner: FfiPolicyBox,
}

impl Policy {
    /// Samples a continuation of `prompt_ids` with the exact tokens and log-probabilities.
    pub fn generate(
        &self,
        prompt_ids: &[u32],
        params: &SamplingParams,
    ) -> Result<Generation, String> {
        unwrap_ffi(
            self.inner
                .generate(prompt_ids.to_vec().into(), params.clone()),
        )
    }

    /// Renders `messages` (and tools) with the chat template and samples a reply.
    pub fn chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        params: &SamplingParams,
    ) -> Result<Generation, String> {
        unwrap_ffi(
            self.inner
                .chat(messages.to_vec().into(), tools_json.into(), params.clone()),
        )
    }

    /// Log-probabilities of response tokens under a prompt (and the top-k when asked).
    pub fn score(&self, request: &ScoreTokens) -> Result<TokenScores, String> {
        unwrap_ffi(self.inner.score(request.clone()))
    }

    /// Renders messages with the chat template.
    pub fn render_chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        unwrap_ffi(self.inner.render_chat(
            messages.to_vec().into(),
            tools_json.into(),
            add_generation_prompt,
        ))
        .map(String::from)
    }

    /// Tokenizes text without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        unwrap_ffi(self.inner.tokenize(text.into())).map(Vec::from)
    }

    /// The weight version in use now.
    pub fn weight_version(&self) -> u64 {
        self.inner.weight_version()
    }
}

/// The judge model, as a plugin sees it.
pub struct Judge {
    inner: FfiJudgeBox,
}

impl Judge {
    /// `request.n` completions; each one may have failed on its own.
    pub fn complete(&self, request: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        unwrap_ffi(self.inner.complete(request.clone())).map(|outs| {
            outs.into_iter()
                .map(|o| o.into_result().map(String::from).map_err(String::from))
                .collect()
        })
    }

    /// Class probabilities from a sequence-classification reward model.
    pub fn classify(&self, text: &str) -> Result<Vec<f32>, String> {
        unwrap_ffi(self.inner.classify(text.into())).map(Vec::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Recorder(Mutex<Vec<String>>);
    impl LogSink for Recorder {
        fn log(&self, level: LogLevel, message: &str) {
            self.0.lock().unwrap().push(format!("{level:?}:{message}"));
        }
    }

    struct PanickyJudge;
    impl JudgeService for PanickyJudge {
        fn complete(&self, _: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
            Ok(vec![Ok("\\boxed{1}".into()), Err("timeout".into())])
        }
        fn classify(&self, _: &str) -> Result<Vec<f32>, String> {
            panic!("classifier exploded")
        }
    }

    #[test]
    fn services_cross_the_boundary_and_panics_become_errors() {
        let rec = Arc::new(Recorder(Mutex::new(vec![])));
        let host = HostServices::builder()
            .log(rec.clone())
            .judge(Arc::new(PanickyJudge))
            .build();
        host.info("hello");
        assert_eq!(rec.0.lock().unwrap().as_slice(), ["Info:hello"]);
        assert!(host.policy().is_none());
        let judge = host.judge().expect("judge given");
        let outs = judge
            .complete(&JudgeRequest {
                messages: vec![Message::new("user", "x")].into(),
                sampling: SamplingParams::default(),
                n: 2,
            })
            .unwrap();
        assert_eq!(
            outs,
            vec![Ok("\\boxed{1}".to_string()), Err("timeout".to_string())]
        );
        let err = judge.classify("x").unwrap_err();
        assert!(err.contains("classifier exploded"), "{err}");
    }
    struct Says(&'static str);
    impl JudgeService for Says {
        fn complete(&self, _: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
            Ok(vec![Ok(self.0.into())])
        }
        fn classify(&self, _: &str) -> Result<Vec<f32>, String> {
            Err(self.0.into())
        }
    }

    fn first_answer(judge: Judge) -> String {
        let request = JudgeRequest {
            messages: vec![Message::new("user", "x")].into(),
            sampling: SamplingParams::default(),
            n: 1,
        };
        judge.complete(&request).unwrap()[0].clone().unwrap()
    }

    #[test]
    fn the_prm_judge_is_its_own_when_given_and_the_judge_otherwise() {
        let both = HostServices::builder()
            .judge(Arc::new(Says("hint")))
            .prm_judge(Arc::new(Says("prm")))
            .build();
        assert_eq!(first_answer(both.judge().unwrap()), "hint");
        assert_eq!(first_answer(both.prm_judge().unwrap()), "prm");
        let one = HostServices::builder().judge(Arc::new(Says("one"))).build();
        assert_eq!(first_answer(one.prm_judge().unwrap()), "one");
        assert!(HostServices::standalone().prm_judge().is_none());
    }
}
