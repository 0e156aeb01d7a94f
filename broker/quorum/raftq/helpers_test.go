package raftq

import "github.com/faultline/faultline/broker/storage"

func osFS() storage.FS { return storage.OS }
