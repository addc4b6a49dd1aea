/*

pynq-kv: the engine's change log (docs/engine.md §10), a FIFO of the
data-plane mutations for the host to drain

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * One record per data-plane mutation that kv_engine reports on its log port
 * (kv_engine_top passes only the front-end's: a SET that changed the table
 * and every DEL), in the engine's execution order:
 *
 *   seq 64 | delete 1 | status 4 | key KEY_W | value VALUE_W (0 for a DEL)
 *
 * Every mutation takes the next sequence number (0 after reset), whether its
 * record is kept or dropped, so the host sees a gap for each record lost.
 * The log holds DEPTH records; a mutation that finds DEPTH records held is
 * applied to the table all the same (this module never pushes back: the
 * engine has no way to wait), its record is dropped, `dropped` counts it and
 * `overflowed` is set until clear_overflow (a drop in the same cycle wins).
 *
 * The records live in kv_fifo with its output register (OUTPUT_REG = 1,
 * block RAM).  The head record is on head_* while head_valid is high;
 * `pop` (a one-cycle strobe, ignored while head_valid is low) removes it,
 * and the next one is on head_* one cycle later.  A mutation reported at
 * clock edge n is counted in `level` after edge n and at the head (when the
 * log was empty) after edge n+1.  A push and a pop in the same cycle: the
 * push is decided on the level before the pop.
 */
module kv_changelog #
(
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: a multiple of 32 from 32 to 512
    parameter VALUE_W = 32,
    // Records held: a power of two from 2 to 65536 (kv_fifo's depths)
    parameter DEPTH = 512
)
(
    input  wire                     clk,
    input  wire                     rst,

    /*
     * Mutations (kv_engine's log port, data plane only); never back-pressured
     */
    input  wire                     log_valid,
    input  wire                     log_del,
    input  wire [3:0]               log_status,
    input  wire [KEY_W-1:0]         log_key,
    input  wire [VALUE_W-1:0]       log_value,

    /*
     * Head record and drain (kv_csr's CL_* registers)
     */
    output wire                     head_valid,
    output wire [63:0]              head_seq,
    output wire                     head_del,
    output wire [3:0]               head_status,
    output wire [KEY_W-1:0]         head_key,
    output wire [VALUE_W-1:0]       head_value,
    input  wire                     pop,
    input  wire                     clear_overflow,
    output wire [31:0]              level,
    output wire [63:0]              dropped,
    output wire                     overflowed
);

localparam AW = $clog2(DEPTH);
localparam REC_W = 64 + 1 + 4 + KEY_W + VALUE_W;

// check configuration
initial begin
    if (KEY_W != 144 && KEY_W != 288 && KEY_W != 576 && KEY_W != 1152) begin
        $error("Error: KEY_W must be 144, 288, 576 or 1152 (instance %m)");
        $finish;
    end
    if (VALUE_W % 32 != 0 || VALUE_W < 32 || VALUE_W > 512) begin
        $error("Error: VALUE_W must be a multiple of 32 from 32 to 512 (instance %m)");
        $finish;
    end
    if (DEPTH < 2 || DEPTH > 65536 || (DEPTH & (DEPTH - 1)) != 0) begin
        $error("Error: DEPTH must be a power of two from 2 to 65536 (instance %m)");
        $finish;
    end
end

reg [63:0] seq_reg;          // sequence number of the next mutation
reg [63:0] dropped_reg;
reg overflowed_reg;

wire [AW:0] count;
wire full = level == DEPTH;
wire push = log_valid && !full;
wire drop = log_valid && full;

wire [REC_W-1:0] rec_in = {seq_reg, log_del, log_status, log_key,
                           log_del ? {VALUE_W{1'b0}} : log_value};
wire [REC_W-1:0] rec_out;
// room is decided by `full` above (the RAM never fills: it holds at most
// DEPTH - 1 records while the output register holds one)
wire fifo_s_ready;

kv_fifo #(
    .WIDTH(REC_W),
    .DEPTH(DEPTH),
    .OUTPUT_REG(1)
)
fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(rec_in),
    .s_valid(push),
    .s_ready(fifo_s_ready),
    .m_data(rec_out),
    .m_valid(head_valid),
    .m_ready(pop),
    .count(count)
);

assign head_value = rec_out[0 +: VALUE_W];
assign head_key = rec_out[VALUE_W +: KEY_W];
assign head_status = rec_out[VALUE_W + KEY_W +: 4];
assign head_del = rec_out[VALUE_W + KEY_W + 4];
assign head_seq = rec_out[VALUE_W + KEY_W + 5 +: 64];
assign level = {{(31-AW){1'b0}}, count};
assign dropped = dropped_reg;
assign overflowed = overflowed_reg;

always @(posedge clk) begin
    if (log_valid) begin
        seq_reg <= seq_reg + 64'd1;
    end
    if (drop) begin
        dropped_reg <= dropped_reg + 64'd1;
    end
    if (clear_overflow) begin
        overflowed_reg <= 1'b0;
    end
    if (drop) begin
        overflowed_reg <= 1'b1;
    end
    if (rst) begin
        seq_reg <= 64'd0;
        dropped_reg <= 64'd0;
        overflowed_reg <= 1'b0;
    end
end

wire unused = fifo_s_ready;

endmodule

`resetall
