//! Chat templates (`specula_chat_*`): formatting a conversation as prompt text, as llama.cpp does.
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

use specula_sys as sys;

use crate::error::Result;
use crate::model::Model;
use crate::util;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// "system", "user", "assistant", ...
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }
}

/// Formats `messages` with a chat template (`specula_chat_apply_template`): `template` is a built-in name
/// ([`builtin_templates`]) or a Jinja template text; `None` uses the model's own. `add_assistant` appends the text
/// that opens the assistant's reply. Append the result with
/// [`TokenizeFlags::PARSE_SPECIAL`](crate::TokenizeFlags::PARSE_SPECIAL).
/// Statuses: `Unsupported` (no template, or an unknown family), `InvalidArgument` (no model and no template).
pub fn apply_template(model: Option<&Model>, template: Option<&str>, messages: &[ChatMessage], add_assistant: bool) -> Result<String> {
    with_c_args(model, template, messages, |mp, tp, cmsgs| {
        util::fetch_text(|buf, size, len, err| unsafe {
            sys::specula_chat_apply_template(mp, tp, cmsgs.as_ptr(), cmsgs.len(), add_assistant as i32, buf, size, len, err)
        })
    })
}

/// The C arguments both formatting calls take: the model (or NULL), the template (or NULL) and the messages as
/// `specula_chat_message`s, valid while `f` runs.
fn with_c_args<F>(model: Option<&Model>, template: Option<&str>, messages: &[ChatMessage], f: F) -> Result<String>
where
    F: FnOnce(*const sys::specula_model, *const c_char, &[sys::specula_chat_message]) -> Result<String>,
{
    let ctmpl = match template {
        Some(t) => Some(util::cstring(t, "chat template")?),
        None => None,
    };
    let mut owned: Vec<(CString, CString)> = Vec::with_capacity(messages.len());
    for m in messages {
        owned.push((util::cstring(&m.role, "chat role")?, util::cstring(&m.content, "chat content")?));
    }
    let cmsgs: Vec<sys::specula_chat_message> =
        owned.iter().map(|(r, c)| sys::specula_chat_message { role: r.as_ptr(), content: c.as_ptr() }).collect();
    let mp = model.map_or(ptr::null(), |m| m.as_raw() as *const sys::specula_model);
    let tp = ctmpl.as_ref().map_or(ptr::null(), |t| t.as_ptr());
    f(mp, tp, &cmsgs)
}

/// Options of [`format`] (`specula_chat_options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatOptions {
    /// Append the text that opens the assistant's reply (default true).
    pub add_assistant: bool,
    /// The template's thinking switch (qwen3's `enable_thinking`): `None` (default) leaves it to the template,
    /// `Some(false)` opens the reply with its empty thinking block. Families without a switch ignore it.
    pub enable_thinking: Option<bool>,
    /// Render the template's own Jinja, as llama-server's `--jinja` (since 0.18; default false: its built-in family).
    pub jinja: bool,
}

impl Default for ChatOptions {
    fn default() -> ChatOptions {
        ChatOptions { add_assistant: true, enable_thinking: None, jinja: false }
    }
}

/// [`apply_template`] with options (`specula_chat_format`, since 0.10).
pub fn format(model: Option<&Model>, template: Option<&str>, messages: &[ChatMessage], options: &ChatOptions) -> Result<String> {
    let mut copts: sys::specula_chat_options = unsafe { std::mem::zeroed() };
    unsafe { sys::specula_chat_options_init_sized(&mut copts, std::mem::size_of_val(&copts)) };
    copts.add_assistant = options.add_assistant as i32;
    copts.enable_thinking = match options.enable_thinking {
        None => -1,
        Some(on) => on as i32,
    };
    copts.jinja = options.jinja as i32;
    with_c_args(model, template, messages, |mp, tp, cmsgs| {
        util::fetch_text(|buf, size, len, err| unsafe {
            sys::specula_chat_format(mp, tp, cmsgs.as_ptr(), cmsgs.len(), &copts, buf, size, len, err)
        })
    })
}

/// The built-in family a template text (or, with `template = None`, the model's template) belongs to, such as
/// "llama3" or "chatml"; `None` if none is recognised.
pub fn detect_template(model: Option<&Model>, template: Option<&str>) -> Option<String> {
    let ctmpl = match template {
        Some(t) => Some(util::cstring(t, "chat template").ok()?),
        None => None,
    };
    let mp = model.map_or(ptr::null(), |m| m.as_raw() as *const sys::specula_model);
    let tp = ctmpl.as_ref().map_or(ptr::null(), |t| t.as_ptr());
    if mp.is_null() && tp.is_null() {
        return None;
    }
    unsafe { util::opt_string_from(sys::specula_chat_template_detect(mp, tp)) }
}

/// Names of the built-in templates.
pub fn builtin_templates() -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        match unsafe { util::opt_string_from(sys::specula_chat_template_builtin(i)) } {
            Some(name) => out.push(name),
            None => return out,
        }
        i += 1;
    }
}
