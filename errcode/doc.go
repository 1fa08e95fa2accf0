// Package errcode gives errors a stable, machine-readable code string.
//
// Every package in shardwise reports failures three ways at once: a sentinel
// for errors.Is, a typed error with detail for errors.As, and a short code
// such as "CONFIG.INVALID" or "SESSION.MISROUTED" that is safe to put on the
// wire and to match in other languages. This package owns only the third:
// the Coder interface, Of to read a code out of a wrapped chain, the Sentinel
// type, and the configuration error every Validate method returns.
//
// Codes are UPPER.DOTTED and never change once published; the message text
// may change at any time and must never be matched.
package errcode
