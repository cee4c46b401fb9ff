//! Records for tests of the crates above the buffer.

/// A small trainable main turn of session `session`, for tests.
pub fn test_turn(session: &str, i: u32) -> openclaw_plugin_api::Turn {
    use openclaw_plugin_api::{Message, TurnType};
    openclaw_plugin_api::Turn {
        session_id: session.into(),
        turn_index: i,
        turn_type: TurnType::Main,
        prompt_messages: vec![Message::new("user", "q")].into(),
        tools_json: "".into(),
        response: Message::new("assistant", "a"),
        prompt_ids: vec![1, 2].into(),
        response_ids: vec![3].into(),
        response_logprobs: vec![-0.5].into(),
        weight_version: 0,
        next_state: None.into(),
        trainable: true,
    }
}
