package randhex

import "testing"

func TestStringIsHexOfTheLengthAsked(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{1, 6, 16, 24, 32} {
		s := String(n)
		if len(s) != 2*n {
			t.Errorf("String(%d) = %q: %d digits, want %d", n, s, len(s), 2*n)
		}
		for _, c := range s {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Errorf("String(%d) = %q: %q is not a lowercase hex digit", n, s, c)
			}
		}
		if seen[s] {
			t.Errorf("String(%d) repeated %q", n, s)
		}
		seen[s] = true
	}
}
