package binread_test

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/binread"
)

// A decoder reads straight through and checks the error once, at Finish.
func Example() {
	errMalformed := errcode.New("EXAMPLE.MALFORMED", "example: malformed payload")
	decode := func(b []byte) ([][]byte, error) {
		r := binread.New(b, "Names", errMalformed)
		r.Version(1)
		names := make([][]byte, r.Count("List", 0, 16, 1))
		for i := range names {
			r.I = i
			names[i] = r.Span("List[]", 8)
		}
		return names, r.Finish()
	}
	fmt.Println(decode([]byte{1, 2, 2, 'h', 'i', 1, 'x'}))
	fmt.Println(decode([]byte{1, 2, 2, 'h', 'i', 3, 'x'}))
	// Output:
	// [[104 105] [120]] <nil>
	// [[104 105] []] example: malformed payload: Names.List[1] at byte 5: 3 bytes, 1 left
}
