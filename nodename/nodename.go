package nodename

import (
	"fmt"
	"unicode/utf8"

	"github.com/shardwise/shardwise/errcode"
)

// MaxLen is the longest node name, in bytes (and characters: every allowed
// character is one byte).
const MaxLen = 64

// Valid reports whether name is a valid node name (see the package doc). It
// does not allocate.
func Valid(name string) bool { return problem(name) == "" }

// Check returns nil if name is a valid node name, and otherwise a
// *errcode.ConfigError (errors.Is(err, errcode.ErrConfigInvalid)) whose
// Field is field, the name of the place the caller read name from, written
// the way its user wrote it ("RegisterConfig.Name", "owners[17]",
// "--nodes"), whose Value is name and whose Reason says what is wrong. A
// name much longer than MaxLen is cut in Value (with "…"), so an error
// about a megabyte of garbage from etcd stays readable.
func Check(field, name string) error {
	reason := problem(name)
	if reason == "" {
		return nil
	}
	value := name
	if len(value) > MaxLen+16 {
		n := MaxLen
		for n > 0 && !utf8.RuneStart(value[n]) {
			n-- // cut between characters, not inside one
		}
		value = value[:n] + "…"
	}
	return errcode.Config(field, value, reason)
}

// problem says what is wrong with name, or "" if nothing is.
func problem(name string) string {
	switch {
	case name == "":
		return "a node name must not be empty"
	case len(name) > MaxLen:
		return fmt.Sprintf("a node name is at most %d bytes, this one is %d", MaxLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			continue
		case i > 0 && (c == '.' || c == '_' || c == '-'):
			continue
		case c == '.' || c == '_' || c == '-':
			return fmt.Sprintf("a node name must start with a lowercase letter or a digit, not %q", c)
		}
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Sprintf("a node name is made of [a-z0-9._-]; byte %d is %q", i, r)
	}
	return ""
}
