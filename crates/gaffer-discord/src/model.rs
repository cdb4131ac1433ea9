//! The Discord payloads the adapter reads (gateway dispatches), with only the
//! fields it uses; unknown fields are ignored as Discord adds them.

use serde::Deserialize;
use serde_json::Value;

/// A user.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Snowflake.
    pub id: String,
    /// Username.
    #[serde(default)]
    pub username: String,
    /// Whether it is a bot (our own messages, other bots).
    #[serde(default)]
    pub bot: bool,
}

/// A guild member (as sent with interactions and messages).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Member {
    /// The user (absent on MESSAGE_CREATE, where `author` is the user).
    #[serde(default)]
    pub user: Option<User>,
    /// Role ids.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// MESSAGE_CREATE.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Snowflake.
    pub id: String,
    /// Where.
    pub channel_id: String,
    /// Who.
    pub author: User,
    /// Their roles, in a guild.
    #[serde(default)]
    pub member: Option<Member>,
    /// Text (needs the MESSAGE_CONTENT intent).
    #[serde(default)]
    pub content: String,
}

/// An application command option.
#[derive(Debug, Clone, Deserialize)]
pub struct CommandOption {
    /// Its name.
    pub name: String,
    /// Its value: a string, or a boolean for a flag.
    #[serde(default)]
    pub value: Value,
}

/// `data` of an interaction: a command's name and options, or a component's `custom_id`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InteractionData {
    /// Command name (type 2).
    #[serde(default)]
    pub name: String,
    /// Command options (type 2).
    #[serde(default)]
    pub options: Vec<CommandOption>,
    /// The pressed component (type 3).
    #[serde(default)]
    pub custom_id: String,
}

/// INTERACTION_CREATE.
#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    /// Snowflake.
    pub id: String,
    /// 1 ping, 2 application command, 3 message component, 4 autocomplete, 5 modal.
    #[serde(rename = "type")]
    pub kind: u8,
    /// Command or component data.
    #[serde(default)]
    pub data: InteractionData,
    /// Where.
    #[serde(default)]
    pub channel_id: String,
    /// The member, in a guild.
    #[serde(default)]
    pub member: Option<Member>,
    /// The user, in a DM.
    #[serde(default)]
    pub user: Option<User>,
    /// The token for the callback (valid 15 minutes; never logged).
    pub token: String,
}

impl Interaction {
    /// Who acted, and their role ids.
    pub fn who(&self) -> Option<(User, Vec<String>)> {
        match (&self.member, &self.user) {
            (Some(m), _) if m.user.is_some() => m.user.clone().map(|u| (u, m.roles.clone())),
            (_, Some(u)) => Some((u.clone(), Vec::new())),
            _ => None,
        }
    }

    /// A string option of a command.
    pub fn option(&self, name: &str) -> Option<String> {
        self.data
            .options
            .iter()
            .find(|o| o.name == name)
            .and_then(|o| o.value.as_str().map(str::to_owned))
    }

    /// A boolean option of a command; absent is false.
    pub fn flag(&self, name: &str) -> bool {
        self.data
            .options
            .iter()
            .any(|o| o.name == name && o.value.as_bool() == Some(true))
    }
}

/// Interaction types.
pub mod interaction_type {
    /// A slash command.
    pub const APPLICATION_COMMAND: u8 = 2;
    /// A button press.
    pub const MESSAGE_COMPONENT: u8 = 3;
}

/// Interaction callback types.
pub mod callback_type {
    /// Answer with a message.
    pub const CHANNEL_MESSAGE: u8 = 4;
    /// Edit the message the component is on.
    pub const UPDATE_MESSAGE: u8 = 7;
}

/// Message flag: only the person who acted sees it.
pub const EPHEMERAL: u64 = 64;
