// pynq-kv memcached frontend: the constants its modules pass to each other
// (docs/frontend_rtl.md), and the binary protocol's request header layout.
//
// `include this file inside a module body (like kv_regs.vh): the constants are
// localparams of the including module. It has no include guard on purpose: one
// compilation unit holds several modules that include it, and a `define guard
// would leave every module after the first without the constants. It declares
// only localparams, so including it twice in one module is an error the tools
// report.
//
// Engine opcodes are not here: they are kv_regs.vh's KV_OP_*.

/* verilator lint_off UNUSEDPARAM */

// walker item kinds: kv_mc_rx m_item_kind (docs/frontend_rtl.md §kv_mc_rx)
localparam [2:0] MC_K_BIN = 3'd0;          // a binary request of at most REQ_BYTES bytes, whole
localparam [2:0] MC_K_BIG = 3'd1;          // a longer binary request: body skipped, first 32 bytes kept
localparam [2:0] MC_K_TRUNC = 3'd2;        // the datagram ended inside a binary request
localparam [2:0] MC_K_MAGIC = 3'd3;        // a header whose magic is not MC_MAGIC_REQ; rest dropped
localparam [2:0] MC_K_EMPTY = 3'd4;        // the datagram carried no request
localparam [2:0] MC_K_DROP_SHORT = 3'd5;   // datagram shorter than the 8-byte frame header: dropped
localparam [2:0] MC_K_DROP_HDR = 3'd6;     // frame header not a single-datagram request: dropped

// response kinds: descriptor field d_rk (kv_mc_dec / kv_mc_text -> kv_mc_fmt)
localparam [3:0] MC_RK_NONE = 4'd0;        // nothing to send (quiet command, end of datagram)
localparam [3:0] MC_RK_GET = 4'd1;         // binary GET family: value or "Not found"
localparam [3:0] MC_RK_SET = 4'd2;         // binary SET: stored or out of memory
localparam [3:0] MC_RK_DEL = 4'd3;         // binary DELETE: deleted or "Not found"
localparam [3:0] MC_RK_MATCH = 4'd4;       // binary lookup through the rule table
localparam [3:0] MC_RK_NOOP = 4'd5;        // binary NOOP: empty reply
localparam [3:0] MC_RK_VERSION = 4'd6;     // binary VERSION: the version string
localparam [3:0] MC_RK_ERR = 4'd7;         // binary error reply; d_code is an MC_E_* code
localparam [3:0] MC_RK_TVALUE = 4'd8;      // text "VALUE <key> 0 <n>" record of a get
localparam [3:0] MC_RK_TEND = 4'd9;        // text "END" closing a get
localparam [3:0] MC_RK_TSET = 4'd10;       // text set: "STORED" or the out-of-memory error
localparam [3:0] MC_RK_TDEL = 4'd11;       // text delete: "DELETED" or "NOT_FOUND"
localparam [3:0] MC_RK_TMSG = 4'd12;       // a fixed text message; d_code is an MC_T_* code

// MC_RK_ERR codes (binary status in brackets)
localparam [3:0] MC_E_TOOLARGE = 4'd0;     // value too large (0x0003)
localparam [3:0] MC_E_INVAL = 4'd1;        // invalid arguments (0x0004)
localparam [3:0] MC_E_UNKNOWN = 4'd2;      // unknown command (0x0081)

// MC_RK_TMSG codes: kv_mc_fmt's text message for code c is M_T_ERROR + c
localparam [3:0] MC_T_ERROR = 4'd0;        // "ERROR"
localparam [3:0] MC_T_BADFMT = 4'd1;       // "CLIENT_ERROR bad command line format"
localparam [3:0] MC_T_DELUSAGE = 4'd2;     // the same, with delete's usage line
localparam [3:0] MC_T_FLAGS = 4'd3;        // "CLIENT_ERROR nonzero flags or exptime not supported"
localparam [3:0] MC_T_BADCHUNK = 4'd4;     // "CLIENT_ERROR bad data chunk"
localparam [3:0] MC_T_TOOLARGE = 4'd5;     // "SERVER_ERROR object too large for cache"
localparam [3:0] MC_T_VERSION = 4'd6;      // "VERSION <v>" (the one message that is not an error)

// binary protocol request header: 24 bytes, multi-byte fields big-endian
// (byte offsets from the start of the header)
localparam [7:0] MC_MAGIC_REQ = 8'h80;     // magic byte of a request
localparam [7:0] MC_MAGIC_RSP = 8'h81;     // magic byte of a response
localparam [15:0] MC_HDR_BYTES = 16'd24;   // header length; the body follows
localparam MC_HDR_MAGIC = 0;               // 1 byte: MC_MAGIC_REQ
localparam MC_HDR_OPCODE = 1;              // 1 byte: command
localparam MC_HDR_KEY_LEN = 2;             // 2 bytes: key length
localparam MC_HDR_EXT_LEN = 4;             // 1 byte: extras length
localparam MC_HDR_BODY_LEN = 8;            // 4 bytes: extras + key + value length
localparam MC_HDR_OPAQUE = 12;             // 4 bytes: echoed in the reply
localparam MC_HDR_CAS = 16;                // 8 bytes: compare-and-swap value

/* verilator lint_on UNUSEDPARAM */
