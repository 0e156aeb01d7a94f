// Package docker holds the node image definition. The harness builds the
// image itself from an in-memory context (see harness.Docker.BuildImage), so
// `docker build` is never needed; `make image` does the same from the shell.
package docker

import _ "embed"

// Dockerfile is the node image's Dockerfile (FROM scratch).
//
//go:embed Dockerfile
var Dockerfile []byte
