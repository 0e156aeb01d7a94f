// Package docker holds the node image's definition: the Dockerfile (FROM
// scratch, since no registry can be reached) that puts the static broker
// and faultline binaries into a node, embedded as Dockerfile so the
// harness builds the image itself from an in-memory context
// (harness.Docker.BuildImage) and `docker build` is never needed; `make
// image` does the same from the shell.
//
// How to use it: put Dockerfile into a build context next to files named
// broker and faultline. The image's entrypoint is /broker; /faultline is
// the in-node fault agent (`/faultline agent ...`); /data is the data
// volume, or, with disk faults, the fault filesystem the agent mounts over
// the volume at /disk.
//
// What it must never do: pull a base image, or hold code: it is data the
// harness reads.
package docker
