package pmir

import (
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
)

// The IHE transactions of the feed's exchanges.
const (
	TransactionSubscribe = "ITI-94"
	TransactionFeed      = "ITI-93"
)

var transactionDisplay = map[string]string{
	TransactionSubscribe: "Subscribe to Patient Updates",
	TransactionFeed:      "Mobile Patient Identity Feed",
}

// The RESTful interactions of the exchanges.
const (
	interactionCreate    = bindings.InteractionCreate
	interactionRead      = bindings.InteractionRead
	interactionSearch    = bindings.InteractionSearch
	interactionDelete    = bindings.InteractionDelete
	interactionOperation = bindings.InteractionOperation // $process-message, the feed
)

// restEvent is one exchange of the feed to audit, the registry its peer: the caller
// sets its outcome, its query (a search) and Inbound (a feed message).
func restEvent(interaction, transaction string, start time.Time, what string) bindings.RESTEvent {
	return bindings.RESTEvent{Interaction: interaction, Transaction: transaction, TransactionDisplay: transactionDisplay[transaction],
		Time: start, What: what, PeerSystem: bindings.ServiceSystem, PeerValue: Key}
}
