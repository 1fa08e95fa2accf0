// Package account is the one identity of a player's account, from the login
// token to the session directory, the interest subscriptions and the game's
// components.
//
// An account is an ID, a 64-bit number; zero is None, "no account" (an
// entity no player owns). Its canonical text is its decimal digits, with no
// sign, no leading zeros and no spaces: the form in Redis keys, logs and
// anything else that carries an account as text. Parse accepts exactly that
// text, so every account has one text and every text one account: two keys
// or log lines that differ name two accounts.
//
// It owns the type, its text form and the parser; it does not own how an
// account is created or what name a player logs in with (the login service
// maps names to IDs, outside this repository).
//
// Invariants:
//  1. Parse(id.String()) == id for every id but None, and Parse(s) succeeds
//     only when s == Parse(s).String(): the text form is canonical.
//  2. Parse refuses None ("0"): a text that names an account names a real one.
//  3. Parsing and formatting do not allocate beyond the returned string.
//
// Layer 0: imports only the standard library and errcode.
package account
