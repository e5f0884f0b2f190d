/*
 * A stand-in for Windows' bcryptprimitives.dll, for the Wine harness of the tests (tests/support/wine.rs) only.
 *
 * Rust's standard library (since 1.78) seeds HashMap keys with ProcessPrng from
 * bcryptprimitives.dll, which every Windows 10 and later has but Wine before 9.0 (Debian 12's
 * wine 8.0) does not ship: there a Rust program stops at start-up with status c0000135 (a DLL
 * not found). The test builds this file with mingw-w64 into the Wine prefix's system32 only when
 * the prefix has no bcryptprimitives.dll of its own. It fills the buffer from RtlGenRandom
 * (advapi32's SystemFunction036), which Wine has.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG part = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, part)) {
            return FALSE;
        }
        data += part;
        length -= part;
    }
    return TRUE;
}
