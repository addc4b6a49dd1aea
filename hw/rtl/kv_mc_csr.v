/*

pynq-kv: front-end registers and counters, in front of the engine CSR

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The AXI4-Lite slave of kv_top.  Addresses 0x900-0xBFF (the front-end
 * block of docs/registers.md: FE_* registers and the FE_COUNTER array) are
 * answered here; every other address is passed on unchanged to kv_csr
 * through m_axil_* and its response returned.
 *
 * Registers (offsets, fields and counter ids from the generated kv_regs.vh):
 *   FE_CTRL         write 1 to CLR_COUNTERS: counters_clear pulse; to
 *                   ADMIT_COMMIT: the admission table as written becomes
 *                   the one on cfg_admit_* (reads 0)
 *   FE_MAC_LO/HI    cfg_mac, reset CFG_MAC (network order, first byte in 47:40)
 *   FE_IP           cfg_ip, reset CFG_IP
 *   FE_UDP_PORT     cfg_udp_port, reset CFG_UDP_PORT
 *   FE_DATA_W       DATA_W (read only)
 *   FE_NUM_COUNTERS NUM_COUNTERS (read only)
 *   FE_ADMIT_ENTRIES ADMIT_ENTRIES (read only)
 *   FE_ADMIT_DEFAULT, FE_ADMIT_ADDR[i], FE_ADMIT_CTRL[i] (i < ADMIT_ENTRIES)
 *                   the admission table as written (staged; reads return
 *                   it); a CTRL write with LEN > 32 answers SLVERR and
 *                   changes nothing.  Reset: no valid entry, default allow
 *                   with budget 2, staged and committed alike.
 *   FE_COUNTER      counter c: word 2c bits 31:0 (reading it latches bits
 *                   63:32 into c's shadow), word 2c+1 the shadow
 * Byte strobes are honoured.  Unmapped front-end addresses, words beyond
 * the counters and the table entries and writes to read-only registers
 * answer SLVERR (reads 0).
 *
 * cfg_admit_*: the committed table, all of it replaced in the clock cycle
 * after the ADMIT_COMMIT write (kv_mc_admit decides each datagram from it in
 * one cycle, so no datagram sees a mix); entry i's prefix LEN is given as a
 * mask (LEN ones from bit 31 down).
 *
 * AXI4-Lite (the handshakes are kv_axil_regs', with registered requests):
 * one write and one read at a time each; a transaction is taken once both
 * awvalid and wvalid (or arvalid) are seen, and its response is given once
 * it has been done here or by kv_csr (the captured address and data are
 * forwarded on m_axil_*).  Address bits above 11 and bits 1:0 are ignored,
 * as in kv_csr.
 */
module kv_mc_csr #
(
    // Key and value widths: only for the stream offsets of kv_regs.vh
    parameter KEY_W = 288,
    parameter VALUE_W = 32,
    // AXI4-Lite address width: >= 12
    parameter ADDR_WIDTH = 12,
    // Front-end stream width, reported in FE_DATA_W
    parameter DATA_W = 512,
    // Number of 64-bit counters on fe_counters: KV_FE_NUM_COUNTERS (checked)
    parameter NUM_COUNTERS = 34,
    // Admission table entries: 1 to 16 (KV_REG_FE_ADMIT_ADDR_SIZE)
    parameter ADMIT_ENTRIES = 8,
    // Reset values of the address registers
    parameter [47:0] CFG_MAC = 48'h020000000001,
    parameter [31:0] CFG_IP = 32'h0A000001,
    parameter [15:0] CFG_UDP_PORT = 16'd11211
)
(
    input  wire                      clk,
    input  wire                      rst,

    /*
     * AXI4-Lite slave (the whole register map)
     */
    input  wire [ADDR_WIDTH-1:0]     s_axil_awaddr,
    input  wire [2:0]                s_axil_awprot,
    input  wire                      s_axil_awvalid,
    output wire                      s_axil_awready,
    input  wire [31:0]               s_axil_wdata,
    input  wire [3:0]                s_axil_wstrb,
    input  wire                      s_axil_wvalid,
    output wire                      s_axil_wready,
    output wire [1:0]                s_axil_bresp,
    output wire                      s_axil_bvalid,
    input  wire                      s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]     s_axil_araddr,
    input  wire [2:0]                s_axil_arprot,
    input  wire                      s_axil_arvalid,
    output wire                      s_axil_arready,
    output wire [31:0]               s_axil_rdata,
    output wire [1:0]                s_axil_rresp,
    output wire                      s_axil_rvalid,
    input  wire                      s_axil_rready,

    /*
     * AXI4-Lite master to kv_csr (everything outside the front-end block)
     */
    output wire [ADDR_WIDTH-1:0]     m_axil_awaddr,
    output wire [2:0]                m_axil_awprot,
    output wire                      m_axil_awvalid,
    input  wire                      m_axil_awready,
    output wire [31:0]               m_axil_wdata,
    output wire [3:0]                m_axil_wstrb,
    output wire                      m_axil_wvalid,
    input  wire                      m_axil_wready,
    input  wire [1:0]                m_axil_bresp,
    input  wire                      m_axil_bvalid,
    output wire                      m_axil_bready,
    output wire [ADDR_WIDTH-1:0]     m_axil_araddr,
    output wire [2:0]                m_axil_arprot,
    output wire                      m_axil_arvalid,
    input  wire                      m_axil_arready,
    input  wire [31:0]               m_axil_rdata,
    input  wire [1:0]                m_axil_rresp,
    input  wire                      m_axil_rvalid,
    output wire                      m_axil_rready,

    /*
     * Front-end configuration and counters
     */
    output wire [47:0]               cfg_mac,
    output wire [31:0]               cfg_ip,
    output wire [15:0]               cfg_udp_port,
    output wire                      counters_clear,
    input  wire [NUM_COUNTERS*64-1:0] fe_counters,

    /*
     * Admission table, committed (kv_mc_core cfg_admit_*)
     */
    output wire [ADMIT_ENTRIES-1:0]    cfg_admit_valid,
    output wire [ADMIT_ENTRIES-1:0]    cfg_admit_allow,
    output wire [32*ADMIT_ENTRIES-1:0] cfg_admit_addr,
    output wire [32*ADMIT_ENTRIES-1:0] cfg_admit_mask,
    output wire [8*ADMIT_ENTRIES-1:0]  cfg_admit_budget,
    output wire                        cfg_admit_def_allow,
    output wire [7:0]                  cfg_admit_def_budget
);

`include "kv_regs.vh"

localparam CNT_IB = $clog2(KV_REG_FE_COUNTER_SIZE);
localparam ADM_IB = $clog2(KV_REG_FE_ADMIT_ADDR_SIZE);
localparam [7:0] DEF_BUDGET = 8'd2;     // reset budget multiplier of the default
localparam [1:0] RESP_OKAY = 2'b00;
localparam [1:0] RESP_SLVERR = 2'b10;

// check configuration
initial begin
    if (ADDR_WIDTH < KV_ADDR_BITS) begin
        $error("Error: ADDR_WIDTH must be at least KV_ADDR_BITS (instance %m)");
        $finish;
    end
    if (NUM_COUNTERS != KV_FE_NUM_COUNTERS) begin
        $error("Error: NUM_COUNTERS must be KV_FE_NUM_COUNTERS of kv_regs.vh (instance %m)");
        $finish;
    end
    if (KV_REG_FE_CTRL[11:8] != 4'h9 || KV_REG_FE_NUM_COUNTERS[11:8] != 4'h9 ||
            KV_REG_FE_ADMIT_DEFAULT[11:8] != 4'h9 || KV_REG_FE_ADMIT_ADDR[11:8] != 4'h9 ||
            KV_REG_FE_ADMIT_CTRL[11:8] != 4'h9 ||
            KV_REG_FE_COUNTER[11:8] != 4'hA || KV_REG_FE_COUNTER_SIZE > 128) begin
        $error("Error: the front-end registers must lie in 0x900-0xBFF (instance %m)");
        $finish;
    end
    if (ADMIT_ENTRIES < 1 || ADMIT_ENTRIES > KV_REG_FE_ADMIT_ADDR_SIZE ||
            KV_REG_FE_ADMIT_CTRL_SIZE != KV_REG_FE_ADMIT_ADDR_SIZE) begin
        $error("Error: ADMIT_ENTRIES must be 1 to KV_REG_FE_ADMIT_ADDR_SIZE (instance %m)");
        $finish;
    end
end

// the prefix mask of a prefix length (0 to 32)
function [31:0] prefix_mask(input [5:0] len);
    integer b;
    begin
        for (b = 0; b < 32; b = b + 1) begin
            prefix_mask[b] = {26'd0, len} > 31 - b;
        end
    end
endfunction

function [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
    integer b;
    begin
        for (b = 0; b < 4; b = b + 1) begin
            merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    end
endfunction

function is_fe(input [3:0] page);
    begin
        is_fe = page == 4'h9 || page == 4'hA || page == 4'hB;
    end
endfunction

/*
 * AXI4-Lite handshakes: a captured front-end access is answered at once, any
 * other once kv_csr has answered it
 */
wire [ADDR_WIDTH-1:0] reg_wr_addr, reg_rd_addr;
wire [2:0] reg_wr_prot, reg_rd_prot;
wire [31:0] reg_wr_data;
wire [3:0] reg_wr_strb;
wire reg_wr_req, reg_wr_ack, reg_rd_req, reg_rd_ack;
wire [1:0] reg_wr_resp, reg_rd_resp;
wire [31:0] reg_rd_data;

kv_axil_regs #(
    .ADDR_WIDTH(ADDR_WIDTH),
    .REQ_REG(1)
)
axil_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(s_axil_awaddr),
    .s_axil_awprot(s_axil_awprot),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr),
    .s_axil_arprot(s_axil_arprot),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .reg_wr_addr(reg_wr_addr),
    .reg_wr_prot(reg_wr_prot),
    .reg_wr_data(reg_wr_data),
    .reg_wr_strb(reg_wr_strb),
    .reg_wr_req(reg_wr_req),
    .reg_wr_ack(reg_wr_ack),
    .reg_wr_resp(reg_wr_resp),
    .reg_rd_addr(reg_rd_addr),
    .reg_rd_prot(reg_rd_prot),
    .reg_rd_req(reg_rd_req),
    .reg_rd_ack(reg_rd_ack),
    .reg_rd_data(reg_rd_data),
    .reg_rd_resp(reg_rd_resp)
);

/*
 * front-end registers
 */
reg [47:0] mac_reg;
reg [31:0] ip_reg;
reg [15:0] port_reg;
reg clear_reg;
reg [NUM_COUNTERS*32-1:0] shadow_reg;

assign cfg_mac = mac_reg;
assign cfg_ip = ip_reg;
assign cfg_udp_port = port_reg;
assign counters_clear = clear_reg;

// admission table: as written (staged) and committed
reg [ADMIT_ENTRIES-1:0] st_valid_reg, st_allow_reg;
reg [32*ADMIT_ENTRIES-1:0] st_addr_reg;
reg [6*ADMIT_ENTRIES-1:0] st_len_reg;
reg [8*ADMIT_ENTRIES-1:0] st_budget_reg;
reg st_def_allow_reg;
reg [7:0] st_def_budget_reg;
reg [ADMIT_ENTRIES-1:0] ad_valid_reg, ad_allow_reg;
reg [32*ADMIT_ENTRIES-1:0] ad_addr_reg, ad_mask_reg;
reg [8*ADMIT_ENTRIES-1:0] ad_budget_reg;
reg ad_def_allow_reg;
reg [7:0] ad_def_budget_reg;

assign cfg_admit_valid = ad_valid_reg;
assign cfg_admit_allow = ad_allow_reg;
assign cfg_admit_addr = ad_addr_reg;
assign cfg_admit_mask = ad_mask_reg;
assign cfg_admit_budget = ad_budget_reg;
assign cfg_admit_def_allow = ad_def_allow_reg;
assign cfg_admit_def_budget = ad_def_budget_reg;

// the staged entry i as its two registers read
function [31:0] ctrl_word(input [ADMIT_ENTRIES-1:0] valid, input [ADMIT_ENTRIES-1:0] allow,
                          input [6*ADMIT_ENTRIES-1:0] len, input [8*ADMIT_ENTRIES-1:0] budget,
                          input integer i);
    begin
        ctrl_word = 32'd0;
        ctrl_word[KV_FE_ADMIT_CTRL_VALID] = valid[i];
        ctrl_word[KV_FE_ADMIT_CTRL_ALLOW] = allow[i];
        ctrl_word[KV_FE_ADMIT_CTRL_LEN +: 6] = len[6*i +: 6];
        ctrl_word[KV_FE_ADMIT_CTRL_BUDGET +: 8] = budget[8*i +: 8];
    end
endfunction

wire [31:0] def_word = ({31'd0, st_def_allow_reg} << KV_FE_ADMIT_DEFAULT_ALLOW) |
                       ({24'd0, st_def_budget_reg} << KV_FE_ADMIT_DEFAULT_BUDGET);

// an address in one of the two entry arrays, and its entry (ok: i < ADMIT_ENTRIES)
function in_array(input [11:0] a, input [11:0] base);
    begin
        in_array = (a >> (ADM_IB + 2)) == (base >> (ADM_IB + 2));
    end
endfunction

/*
 * write channel: a front-end write is done at once, any other is forwarded
 * to kv_csr
 */
localparam [1:0]
    F_IDLE = 2'd0,
    F_FWD = 2'd1,
    F_WAIT = 2'd2;

reg [1:0] w_state_reg;
reg m_awvalid_reg, m_wvalid_reg;

wire wr_fe = is_fe(reg_wr_addr[11:8]);
assign m_axil_awaddr = reg_wr_addr;
assign m_axil_awprot = reg_wr_prot;
assign m_axil_awvalid = m_awvalid_reg;
assign m_axil_wdata = reg_wr_data;
assign m_axil_wstrb = reg_wr_strb;
assign m_axil_wvalid = m_wvalid_reg;
assign m_axil_bready = w_state_reg == F_WAIT;

wire [11:0] wa = {reg_wr_addr[11:2], 2'b00};
wire wr_mac_lo = wa == KV_REG_FE_MAC_LO;
wire wr_mac_hi = wa == KV_REG_FE_MAC_HI;
wire wr_ip = wa == KV_REG_FE_IP;
wire wr_port = wa == KV_REG_FE_UDP_PORT;
wire wr_ctrl = wa == KV_REG_FE_CTRL;
wire wr_def = wa == KV_REG_FE_ADMIT_DEFAULT;
wire [ADM_IB-1:0] wr_ai = wa[2 +: ADM_IB];
wire wr_ai_ok = {{(32-ADM_IB){1'b0}}, wr_ai} < ADMIT_ENTRIES;
wire wr_aaddr = in_array(wa, KV_REG_FE_ADMIT_ADDR) && wr_ai_ok;
wire wr_actrl_at = in_array(wa, KV_REG_FE_ADMIT_CTRL) && wr_ai_ok;
wire [31:0] ctrl_bits = merge(32'd0, reg_wr_data, reg_wr_strb);
wire [31:0] mac_hi_new = merge({16'd0, mac_reg[47:32]}, reg_wr_data, reg_wr_strb);
wire [31:0] port_new = merge({16'd0, port_reg}, reg_wr_data, reg_wr_strb);
wire [31:0] def_new = merge(def_word, reg_wr_data, reg_wr_strb);

reg [31:0] actrl_old, aaddr_old;
integer n;
always @* begin
    actrl_old = 32'd0;
    aaddr_old = 32'd0;
    for (n = 0; n < ADMIT_ENTRIES; n = n + 1) begin
        if ({{(32-ADM_IB){1'b0}}, wr_ai} == n) begin
            actrl_old = ctrl_word(st_valid_reg, st_allow_reg, st_len_reg, st_budget_reg, n);
            aaddr_old = st_addr_reg[32*n +: 32];
        end
    end
end
wire [31:0] actrl_new = merge(actrl_old, reg_wr_data, reg_wr_strb);
wire [5:0] len_new = actrl_new[KV_FE_ADMIT_CTRL_LEN +: 6];
wire wr_actrl = wr_actrl_at && len_new <= 6'd32;
wire wr_ok = wr_mac_lo || wr_mac_hi || wr_ip || wr_port || wr_ctrl || wr_def || wr_aaddr || wr_actrl;

assign reg_wr_ack = wr_fe || (w_state_reg == F_WAIT && m_axil_bvalid);
assign reg_wr_resp = !wr_fe ? m_axil_bresp : wr_ok ? RESP_OKAY : RESP_SLVERR;
wire wr_fe_en = reg_wr_req && wr_fe;

always @(posedge clk) begin
    clear_reg <= 1'b0;
    if (wr_fe_en) begin
        if (wr_mac_lo) begin
            mac_reg[31:0] <= merge(mac_reg[31:0], reg_wr_data, reg_wr_strb);
        end
        if (wr_mac_hi) begin
            mac_reg[47:32] <= mac_hi_new[15:0];
        end
        if (wr_ip) begin
            ip_reg <= merge(ip_reg, reg_wr_data, reg_wr_strb);
        end
        if (wr_port) begin
            port_reg <= port_new[15:0];
        end
        if (wr_ctrl) begin
            clear_reg <= ctrl_bits[KV_FE_CTRL_CLR_COUNTERS];
        end
        if (wr_def) begin
            st_def_allow_reg <= def_new[KV_FE_ADMIT_DEFAULT_ALLOW];
            st_def_budget_reg <= def_new[KV_FE_ADMIT_DEFAULT_BUDGET +: 8];
        end
        for (n = 0; n < ADMIT_ENTRIES; n = n + 1) begin
            if ({{(32-ADM_IB){1'b0}}, wr_ai} == n) begin
                if (wr_aaddr) begin
                    st_addr_reg[32*n +: 32] <= merge(aaddr_old, reg_wr_data, reg_wr_strb);
                end
                if (wr_actrl) begin
                    st_valid_reg[n] <= actrl_new[KV_FE_ADMIT_CTRL_VALID];
                    st_allow_reg[n] <= actrl_new[KV_FE_ADMIT_CTRL_ALLOW];
                    st_len_reg[6*n +: 6] <= len_new;
                    st_budget_reg[8*n +: 8] <= actrl_new[KV_FE_ADMIT_CTRL_BUDGET +: 8];
                end
            end
        end
        if (wr_ctrl && ctrl_bits[KV_FE_CTRL_ADMIT_COMMIT]) begin
            ad_valid_reg <= st_valid_reg;
            ad_allow_reg <= st_allow_reg;
            ad_addr_reg <= st_addr_reg;
            ad_budget_reg <= st_budget_reg;
            ad_def_allow_reg <= st_def_allow_reg;
            ad_def_budget_reg <= st_def_budget_reg;
            for (n = 0; n < ADMIT_ENTRIES; n = n + 1) begin
                ad_mask_reg[32*n +: 32] <= prefix_mask(st_len_reg[6*n +: 6]);
            end
        end
    end
    case (w_state_reg)
        F_IDLE: begin
            if (reg_wr_req && !wr_fe) begin
                m_awvalid_reg <= 1'b1;
                m_wvalid_reg <= 1'b1;
                w_state_reg <= F_FWD;
            end
        end
        F_FWD: begin
            if (m_axil_awready) begin
                m_awvalid_reg <= 1'b0;
            end
            if (m_axil_wready) begin
                m_wvalid_reg <= 1'b0;
            end
            if ((m_axil_awready || !m_awvalid_reg) && (m_axil_wready || !m_wvalid_reg)) begin
                w_state_reg <= F_WAIT;
            end
        end
        default: begin // F_WAIT: the response goes back through kv_axil_regs
            if (m_axil_bvalid) begin
                w_state_reg <= F_IDLE;
            end
        end
    endcase
    if (rst) begin
        w_state_reg <= F_IDLE;
        m_awvalid_reg <= 1'b0;
        m_wvalid_reg <= 1'b0;
        clear_reg <= 1'b0;
        mac_reg <= CFG_MAC;
        ip_reg <= CFG_IP;
        port_reg <= CFG_UDP_PORT;
        st_valid_reg <= {ADMIT_ENTRIES{1'b0}};
        st_allow_reg <= {ADMIT_ENTRIES{1'b0}};
        st_addr_reg <= {32*ADMIT_ENTRIES{1'b0}};
        st_len_reg <= {6*ADMIT_ENTRIES{1'b0}};
        st_budget_reg <= {8*ADMIT_ENTRIES{1'b0}};
        st_def_allow_reg <= 1'b1;
        st_def_budget_reg <= DEF_BUDGET;
        ad_valid_reg <= {ADMIT_ENTRIES{1'b0}};
        ad_allow_reg <= {ADMIT_ENTRIES{1'b0}};
        ad_addr_reg <= {32*ADMIT_ENTRIES{1'b0}};
        ad_mask_reg <= {32*ADMIT_ENTRIES{1'b0}};
        ad_budget_reg <= {8*ADMIT_ENTRIES{1'b0}};
        ad_def_allow_reg <= 1'b1;
        ad_def_budget_reg <= DEF_BUDGET;
    end
end

/*
 * read channel: the same split
 */
reg [1:0] r_state_reg;
reg m_arvalid_reg;

wire rd_fe = is_fe(reg_rd_addr[11:8]);
assign m_axil_araddr = reg_rd_addr;
assign m_axil_arprot = reg_rd_prot;
assign m_axil_arvalid = m_arvalid_reg;
assign m_axil_rready = r_state_reg == F_WAIT;

wire [11:0] ra = {reg_rd_addr[11:2], 2'b00};
wire [CNT_IB-1:0] cidx = ra[2 +: CNT_IB];
wire in_cnt = (ra >> (CNT_IB + 2)) == (KV_REG_FE_COUNTER >> (CNT_IB + 2));
wire [31:0] cidx32 = {{(32-CNT_IB){1'b0}}, cidx};
wire cnt_ok = in_cnt && cidx32 < 2 * NUM_COUNTERS;
wire [31:0] cnum32 = cidx32 >> 1;

reg [31:0] cnt_lo, cnt_hi, cnt_shadow;
integer k;
always @* begin
    cnt_lo = 32'd0;
    cnt_hi = 32'd0;
    cnt_shadow = 32'd0;
    for (k = 0; k < NUM_COUNTERS; k = k + 1) begin
        cnt_lo = cnt_lo | (fe_counters[64*k +: 32] & {32{cnum32 == k}});
        cnt_hi = cnt_hi | (fe_counters[64*k + 32 +: 32] & {32{cnum32 == k}});
        cnt_shadow = cnt_shadow | (shadow_reg[32*k +: 32] & {32{cnum32 == k}});
    end
end

wire [ADM_IB-1:0] rd_ai = ra[2 +: ADM_IB];
wire rd_ai_ok = {{(32-ADM_IB){1'b0}}, rd_ai} < ADMIT_ENTRIES;
wire rd_aaddr = in_array(ra, KV_REG_FE_ADMIT_ADDR);
wire rd_actrl = in_array(ra, KV_REG_FE_ADMIT_CTRL);
reg [31:0] rd_aaddr_data, rd_actrl_data;
integer m;
always @* begin
    rd_aaddr_data = 32'd0;
    rd_actrl_data = 32'd0;
    for (m = 0; m < ADMIT_ENTRIES; m = m + 1) begin
        if ({{(32-ADM_IB){1'b0}}, rd_ai} == m) begin
            rd_aaddr_data = st_addr_reg[32*m +: 32];
            rd_actrl_data = ctrl_word(st_valid_reg, st_allow_reg, st_len_reg, st_budget_reg, m);
        end
    end
end

reg [31:0] rd_data;
reg rd_ok;
always @* begin
    rd_data = 32'd0;
    rd_ok = 1'b1;
    case (ra)
        KV_REG_FE_CTRL:         rd_data = 32'd0;
        KV_REG_FE_MAC_LO:       rd_data = mac_reg[31:0];
        KV_REG_FE_MAC_HI:       rd_data = {16'd0, mac_reg[47:32]};
        KV_REG_FE_IP:           rd_data = ip_reg;
        KV_REG_FE_UDP_PORT:     rd_data = {16'd0, port_reg};
        KV_REG_FE_DATA_W:       rd_data = DATA_W;
        KV_REG_FE_NUM_COUNTERS: rd_data = NUM_COUNTERS;
        KV_REG_FE_ADMIT_ENTRIES: rd_data = ADMIT_ENTRIES;
        KV_REG_FE_ADMIT_DEFAULT: rd_data = def_word;
        default: begin
            if (rd_aaddr || rd_actrl) begin
                rd_ok = rd_ai_ok;
                rd_data = !rd_ai_ok ? 32'd0 : rd_aaddr ? rd_aaddr_data : rd_actrl_data;
            end else begin
                rd_ok = cnt_ok;
                rd_data = !cnt_ok ? 32'd0 : (cidx[0] ? cnt_shadow : cnt_lo);
            end
        end
    endcase
end

assign reg_rd_ack = rd_fe || (r_state_reg == F_WAIT && m_axil_rvalid);
assign reg_rd_data = rd_fe ? rd_data : m_axil_rdata;
assign reg_rd_resp = !rd_fe ? m_axil_rresp : rd_ok ? RESP_OKAY : RESP_SLVERR;

integer j;
always @(posedge clk) begin
    if (reg_rd_req && rd_fe && cnt_ok && !cidx[0]) begin
        for (j = 0; j < NUM_COUNTERS; j = j + 1) begin
            if (cnum32 == j) begin
                shadow_reg[32*j +: 32] <= cnt_hi;
            end
        end
    end
    case (r_state_reg)
        F_IDLE: begin
            if (reg_rd_req && !rd_fe) begin
                m_arvalid_reg <= 1'b1;
                r_state_reg <= F_FWD;
            end
        end
        F_FWD: begin
            if (m_axil_arready) begin
                m_arvalid_reg <= 1'b0;
                r_state_reg <= F_WAIT;
            end
        end
        default: begin // F_WAIT
            if (m_axil_rvalid) begin
                r_state_reg <= F_IDLE;
            end
        end
    endcase
    if (rst) begin
        r_state_reg <= F_IDLE;
        m_arvalid_reg <= 1'b0;
        shadow_reg <= {NUM_COUNTERS*32{1'b0}};
    end
end

// the upper bits of the 16-bit registers' merged words; CTRL and admission bits outside fields
wire unused = &{1'b0, ctrl_bits, mac_hi_new[31:16], port_new[31:16], def_new, actrl_new};

endmodule

`resetall
