// Package config turns a Kafka server.properties file into a typed,
// validated Config with Kafka's defaults.
//
// Use it as cmd/broker does:
//
//	cfg, warnings, err := config.Load(path)
//	for _, w := range warnings { logger.Warn(w) }
//	if err != nil { /* print each line of config.Problems(err); exit non-zero */ }
//	if err := cfg.CheckDirs(); err != nil { /* same */ }
//
// Load and FromMap report every problem at once, one line each, in the form
// "key: what is wrong; what to do". Unknown keys are warnings, never errors:
// Kafka users carry many keys faultline has no use for.
//
// The package never touches the disk except in Load (reading the file) and
// CheckDirs (creating the data dirs and writing a probe file), and never
// panics on any input: ParseProperties and FromMap are fuzzed.
package config
