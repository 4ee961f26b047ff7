//! The Worker this repository serves (`scripts/dev`) and deploys (`wrangler
//! deploy`): homeroom's open rooms at `/rooms/...`, the demo's auction at
//! `/auction/...`, the chat example at `/chat/...`, Yjs documents at
//! `/docs/...` (the editor page's) and the notes example's at `/notes/...`, each kind its own
//! Durable Object class (`wrangler.toml`); the auction's lot page
//! (`GET /auction/{room}/lot`) is its one public route. A team's own Worker
//! is a crate like this one (README, "Writing a room").
//!
//! The documents are the crate's default features `documents` (`/docs`) and `notes`
//! (`/notes`); `bench/run` also builds it without either (`--no-default-features`) and with
//! `documents` alone, to weigh what the document kind adds to the Wasm.

/// The Worker's kinds, with whatever follows them (the document kinds, when built with them).
macro_rules! kinds {
    ($($documents:tt)*) => {
        homeroom::worker! {
            "rooms" => Room(homeroom::room::rules::Open), binding "ROOMS",
                companion RoomRelay(homeroom::host::Relay), binding "ROOM_RELAYS";
            "auction" => AuctionRoom(homeroom::room::rules::with_vars(homeroom_auction::Auction::from_vars)), binding "AUCTIONS",
                companion AuctionRelay(homeroom::host::Relay), binding "AUCTION_RELAYS", public ["GET lot"];
            "chat" => ChatRoom(homeroom::room::rules::with_vars(homeroom_chat::Chat::from_vars)), binding "CHATS",
                companion ChatRelay(homeroom::host::Relay), binding "CHAT_RELAYS";
            $($documents)*
        }
    };
}

#[cfg(feature = "notes")]
kinds! {
    documents {
        "docs" => Document, binding "DOCS";
        "notes" => Note(homeroom::room::rules::with_vars(homeroom_notes::Notes::from_vars)), binding "NOTES";
    }
}

#[cfg(all(feature = "documents", not(feature = "notes")))]
kinds! {
    documents {
        "docs" => Document, binding "DOCS";
    }
}

#[cfg(not(feature = "documents"))]
kinds! {}
