/* protocol_host.h - protocol.h as the host includes it, with its integer types from <stdint.h>. */
#ifndef MW_PROTOCOL_HOST_H
#define MW_PROTOCOL_HOST_H
#include <stdint.h>
typedef uint8_t mw_u8;
typedef uint16_t mw_u16;
typedef uint32_t mw_u32;
typedef int32_t mw_i32;
typedef uint64_t mw_u64;
typedef int64_t mw_i64;
#include "protocol.h"
#endif
