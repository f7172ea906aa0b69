package schema

import "testing"

// A job shows its strongest row's state: held while any slot is held, an
// expired row before a released one, and any row before none ("").
func TestStrongerState(t *testing.T) {
	for _, tc := range []struct{ a, b, want LeaseState }{
		{StateReleased, StateHeld, StateHeld},
		{StateHeld, StateKept, StateHeld},
		{StateKept, StateReleasing, StateReleasing},
		{StateReleased, StateExpired, StateExpired},
		{"", StateReleased, StateReleased},
		{StateExpired, "", StateExpired},
		{"", "", ""},
	} {
		if got := StrongerState(tc.a, tc.b); got != tc.want {
			t.Errorf("StrongerState(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
		if got := StrongerState(tc.b, tc.a); got != tc.want {
			t.Errorf("StrongerState(%q, %q) = %q, want %q", tc.b, tc.a, got, tc.want)
		}
	}
}
