package authzen_test

import (
	"slices"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/authzen"
)

func TestDecisions(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []bool
		bad  bool
	}{
		{"1.0's evaluations", `{"evaluations":[{"decision":true},{"decision":false,"context":{"reason":"x"}}]}`, []bool{true, false}, false},
		{"the earlier draft's decisions", `{"decisions":[{"decision":false},{"decision":true}]}`, []bool{false, true}, false},
		{"an empty array denies everyone", `{"evaluations":[]}`, []bool{}, false},
		{"no array at all", `{"decision":true}`, nil, true},
		{"a decision that is no boolean", `{"evaluations":[{"decision":"yes"}]}`, nil, true},
		{"an item without a decision", `{"evaluations":[{}]}`, nil, true},
		{"not JSON", `<xml/>`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authzen.Decisions([]byte(tc.body))
			if tc.bad {
				if err == nil {
					t.Fatalf("read %v", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Decisions = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
