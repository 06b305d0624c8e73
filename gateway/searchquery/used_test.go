package searchquery

import "testing"

func TestUsedQueryKeepsWhatEveryMemberUsed(t *testing.T) {
	mq := "name=smith&colour=blue&code%3Atext=x&_count=20&_sort=family"
	for _, c := range []struct {
		selfs []string
		want  string
	}{
		{nil, mq},
		{[]string{"http://m/fhir/Patient"}, mq}, // names no parameter: it cannot tell
		{[]string{"http://m/fhir/Patient?name=smith&code:text=x&_count=20&_sort=family"}, "name=smith&code%3Atext=x&_count=20&_sort=family"},
		{[]string{"http://m/fhir/Patient?name=smith&colour=blue&code:text=x", "http://n/fhir/Patient?name=smith&_offset=0"}, "name=smith&_count=20&_sort=family"},
		{[]string{"http://m/fhir/Patient?_count=20"}, "_count=20&_sort=family"},
	} {
		if got := UsedQuery(mq, c.selfs); got != c.want {
			t.Errorf("%v: %q, want %q", c.selfs, got, c.want)
		}
	}
}
