package docker

import _ "embed"

// Dockerfile is the node image's Dockerfile (FROM scratch).
//
//go:embed Dockerfile
var Dockerfile []byte
