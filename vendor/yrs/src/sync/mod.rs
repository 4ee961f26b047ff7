pub mod awareness;
pub mod protocol;
pub mod time;

pub use crate::sync::awareness::Awareness;
pub use crate::sync::awareness::AwarenessUpdate;
pub use crate::sync::protocol::DefaultProtocol;
pub use crate::sync::protocol::Error;
pub use crate::sync::protocol::Message;
pub use crate::sync::protocol::MessageReader;
pub use crate::sync::protocol::Protocol;
pub use crate::sync::protocol::SyncMessage;
pub use crate::sync::time::Clock;
pub use crate::sync::time::Timestamp;
