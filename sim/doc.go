// Package sim is simulated players: clients that log in to a gateway
// through the real client protocol (WebSocket, protobuf, the outbox frames
// of proto/client.proto and docs/protocol.md) and play the reference game.
// The tests, the demo and the benchmarks use it.
//
// What it owns: Client, one player's connection and the world it knows
// (entities and their last component payloads, its own master and pet,
// terrain), kept by one reader goroutine per client, with counters of what
// a player would notice (blinks: an entity that vanishes out of sight and
// is back within two ticks; batches out of tick order) and of where the
// bytes went (ByteCounts); a lean Client (DialOptions.Lean) reads and
// checks every message alike but keeps only its own master and pet, as a
// bot that only walks needs (the gateway benchmark's clients); the
// player's own purse (View.Purse) and the economy's inputs (Buy, Offer,
// Accept, CancelTrade); and Bots (StartBots, RunBots): players on a
// seeded plan (BotPlan) that log in round robin over gateways, walk legs
// across region borders, fight the mobs they see, log out and back in on
// the next gateway, and, with the game's economy, buy from the dens'
// keepers (BotsConfig.ShopChance) and trade in pairs across a border
// (TradeChance, econbots.go), reading every outcome from their purses.
//
// What it does not own: the protocol (package gateway and proto/clientpb),
// the frame format (outbox), the game's payloads (game), the tokens
// (logintoken: the caller brings them).
//
// Invariants:
//  1. A Client's state changes only on its reader goroutine, under its
//     mutex; Look and Wait see one consistent state.
//  2. Close cuts the socket and returns after the reader has returned.
//  3. A bot's walks and relogs, its shops and its pair's trades come from
//     three seeded streams, each drawn the same every leg: a chance
//     changes no other step, and with both economy chances 0 a plan is
//     what it was before bots shopped or traded.
package sim
