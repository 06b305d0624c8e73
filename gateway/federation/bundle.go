package federation

import (
	"time"

	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/searchset"
)

// Record is one member's part in a federated request, and Bundle the page that
// carries the records (gateway/searchset).
type (
	Record = searchset.Record
	Bundle = searchset.Bundle
)

// ProbeRecord is one member's line in the ask-all probe's answer.
type ProbeRecord struct {
	ID         string           `json:"id"`
	Outcome    outbound.Outcome `json:"outcome"`
	Status     int              `json:"status,omitempty"`
	DurationMS int64            `json:"duration_ms"`
}

func millis(d time.Duration) int64 { return d.Milliseconds() }
