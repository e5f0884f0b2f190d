//! Windows named pipes that only the current user may open: the channel between agentacp's
//! bridge and its stdio MCP shims. A named pipe's default security lets every user of the
//! machine open it for reading; [`create_private`] gives it a DACL with one entry instead,
//! full access for the user the process runs as (`TokenUser`), so no one else may open it
//! (administrators can still take ownership, as of any object).

use std::ffi::c_void;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::{GENERIC_ALL, HANDLE};
use windows_sys::Win32::Security::{
    ACL, ACL_REVISION, AddAccessAllowedAce, GetLengthSid, GetTokenInformation, InitializeAcl,
    InitializeSecurityDescriptor, SECURITY_ATTRIBUTES, SECURITY_DESCRIPTOR, SetSecurityDescriptorDacl, TOKEN_QUERY,
    TOKEN_USER, TokenUser,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// `SECURITY_DESCRIPTOR_REVISION` (in windows-sys's `SystemServices`, a feature not needed
/// otherwise).
const SECURITY_DESCRIPTOR_REVISION: u32 = 1;

/// A `BOOL` result as an `io::Result`, the error the thread's last one.
fn check(result: i32) -> io::Result<()> {
    if result == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Creates an instance of the pipe `name` with `options`, only the current user allowed to
/// open it (see the module).
pub fn create_private(options: &ServerOptions, name: &str) -> io::Result<NamedPipeServer> {
    let user = current_user()?;
    let token_user = user.as_ptr().cast::<TOKEN_USER>();
    #[allow(unsafe_code)]
    // SAFETY: `user` holds a TOKEN_USER (written by GetTokenInformation), whose `Sid` points
    // into the same buffer, alive until the end of this function.
    let sid = unsafe { (*token_user).User.Sid };
    #[allow(unsafe_code)]
    // SAFETY: `sid` is a valid SID (above).
    let sid_len = unsafe { GetLengthSid(sid) } as usize;
    // One access-allowed entry: the ACL header (8 bytes), the entry's header and mask (8), the SID.
    let acl_len = (8 + 8 + sid_len).next_multiple_of(4);
    let mut acl = vec![0u32; acl_len / 4];
    let acl = acl.as_mut_ptr().cast::<ACL>();
    let mut descriptor = SECURITY_DESCRIPTOR {
        Revision: 0,
        Sbz1: 0,
        Control: 0,
        Owner: std::ptr::null_mut(),
        Group: std::ptr::null_mut(),
        Sacl: std::ptr::null_mut(),
        Dacl: std::ptr::null_mut(),
    };
    let descriptor_ptr = (&mut descriptor as *mut SECURITY_DESCRIPTOR).cast::<c_void>();
    #[allow(unsafe_code)]
    // SAFETY: `acl` is a writable, 4-byte aligned buffer of `acl_len` bytes, large enough
    // for the header and one entry with `sid`; `descriptor` is a SECURITY_DESCRIPTOR on this
    // stack frame; both outlive the pipe's creation, which copies the descriptor.
    unsafe {
        check(InitializeAcl(acl, acl_len as u32, ACL_REVISION))?;
        check(AddAccessAllowedAce(acl, ACL_REVISION, GENERIC_ALL, sid))?;
        check(InitializeSecurityDescriptor(
            descriptor_ptr,
            SECURITY_DESCRIPTOR_REVISION,
        ))?;
        check(SetSecurityDescriptorDacl(descriptor_ptr, 1, acl, 0))?;
    }
    let mut attributes = SECURITY_ATTRIBUTES {
        nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: descriptor_ptr,
        bInheritHandle: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: `attributes` is a SECURITY_ATTRIBUTES whose descriptor (and its ACL) is valid
    // for the duration of the call (above).
    unsafe {
        options.create_with_security_attributes_raw(name, (&mut attributes as *mut SECURITY_ATTRIBUTES).cast())
    }
}

/// The current process's `TokenUser` information (a TOKEN_USER and the SID it points to), in
/// a buffer aligned for it.
fn current_user() -> io::Result<Vec<u64>> {
    let mut raw: HANDLE = std::ptr::null_mut();
    #[allow(unsafe_code)]
    // SAFETY: GetCurrentProcess returns a pseudo-handle; `raw` receives a new handle.
    check(unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut raw) })?;
    #[allow(unsafe_code)]
    // SAFETY: `raw` is a handle this process now owns (OpenProcessToken succeeded).
    let token = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut len = 0u32;
    #[allow(unsafe_code)]
    // SAFETY: asking for the size only (no buffer); the call fails with
    // ERROR_INSUFFICIENT_BUFFER and sets `len`.
    unsafe {
        GetTokenInformation(token.as_raw_handle(), TokenUser, std::ptr::null_mut(), 0, &mut len);
    }
    if len == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buffer = vec![0u64; (len as usize).div_ceil(8)];
    #[allow(unsafe_code)]
    // SAFETY: `buffer` is writable and at least `len` bytes long.
    check(unsafe {
        GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            buffer.as_mut_ptr().cast(),
            len,
            &mut len,
        )
    })?;
    Ok(buffer)
}
