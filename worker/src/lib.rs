//! The Worker this repository serves (`scripts/dev`) and deploys (`wrangler
//! deploy`): homeroom's open rooms at `/rooms/...`, the demo's auction at
//! `/auction/...`, the chat example at `/chat/...` and Yjs documents at
//! `/docs/...` (the editor page's), each kind its own
//! Durable Object class (`wrangler.toml`); the auction's lot page
//! (`GET /auction/{room}/lot`) is its one public route. A team's own Worker
//! is a crate like this one (README, "Writing a room").

homeroom::worker! {
    "rooms" => Room(homeroom::room::rules::Open), binding "ROOMS",
        companion RoomRelay(homeroom::host::Relay), binding "ROOM_RELAYS";
    "auction" => AuctionRoom(homeroom::room::rules::with_vars(homeroom_auction::Auction::from_vars)), binding "AUCTIONS",
        companion AuctionRelay(homeroom::host::Relay), binding "AUCTION_RELAYS", public ["GET lot"];
    "chat" => ChatRoom(homeroom::room::rules::with_vars(homeroom_chat::Chat::from_vars)), binding "CHATS",
        companion ChatRelay(homeroom::host::Relay), binding "CHAT_RELAYS";
    documents {
        "docs" => Document, binding "DOCS";
    }
}
