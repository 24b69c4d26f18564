/* errors.c - error names and messages generated from MW_ERRNO_MAP, type names, version. */
#include "moonwarp.h"

const char *mw__get_error(void);

#ifndef MW_VERSION
#error "MW_VERSION comes from project(VERSION) in CMakeLists.txt"
#endif

MW_API const char *mw_strerror(int err) {
  switch (err) {
    case MW_OK: return "success";
#define MW__MSG(name, val, msg) \
  case MW_##name: return msg;
    MW_ERRNO_MAP(MW__MSG)
#undef MW__MSG
    default: return "unknown error";
  }
}

MW_API const char *mw_err_name(int err) {
  switch (err) {
    case MW_OK: return "OK";
#define MW__NAME(name, val, msg) \
  case MW_##name: return #name;
    MW_ERRNO_MAP(MW__NAME)
#undef MW__NAME
    default: return "EUNKNOWN";
  }
}

MW_API const char *mw_last_error(void) { return mw__get_error(); }

MW_API const char *mw_version(void) { return MW_VERSION; }

MW_API const char *mw_type_name(mw_type t) {
  static const char *const names[MW_T__COUNT] = {
      "void", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
      "int64", "uint64", "float", "double", "pointer", "future"};
  return (unsigned)t < MW_T__COUNT ? names[t] : "?";
}
