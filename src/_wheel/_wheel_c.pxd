from libc.stdint cimport int32_t, int64_t


cdef struct Node:
    # 32 bytes. Where the node is, told by ``slot``:
    #   slot >= 0   in slot array ``slot`` (wheel slots, then the ready list) at ``pos``
    #   slot == -2  in the overflow heap at ``pos``
    #   slot == -1  free; ``pos`` links the free list
    int64_t key
    int64_t due
    int64_t seq
    int32_t slot
    int32_t pos


cdef struct Vec:
    # One slot: a growable array of pool indices (unordered; sorted when it fires).
    int32_t* items
    int32_t len
    int32_t cap
