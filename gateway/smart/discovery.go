package smart

// DiscoveryPath is where a FHIR server publishes its SMART configuration, under its
// FHIR base (SMART App Launch 2.x): the one path of the data plane a client reads
// before it holds a token, so the one that asks for none (gateway/access).
const DiscoveryPath = ".well-known/smart-configuration"
